#include "runtime/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <memory>

namespace fusebox {

namespace {

std::string reason(int err) { return std::strerror(err); }

std::string too_large(const std::string& name, uint64_t max_bytes) {
  return "'" + name + "' is larger than the " + format_byte_size(max_bytes) + " limit for this kind of file";
}

// Writes all of `bytes` to fd; false with errno set on failure.
bool write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

Status write_error(const std::string& path, int err) {
  return Status::invalid("cannot write '" + path + "': " + reason(err));
}

// A symlink, FIFO or device: the user named it, so write into it rather than replace it.
Status write_through(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return write_error(path, errno);
  bool ok = write_all(fd, bytes);
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  return ok ? Status::ok() : write_error(path, err);
}

// A new path or a regular file: a temporary sibling, then a rename, so readers see the old
// file or the whole new one.
Status write_replacing(const std::string& path, std::string_view bytes, const struct stat* old) {
  std::string tmp = path + ".XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);  // O_EXCL: a fresh name, never a planted file
  if (fd < 0) return write_error(path, errno);
  // mkstemp creates 0600; give the file what O_CREAT would have (0666 less the umask), or
  // the permissions of the file it replaces.
  mode_t mode = 0;
  if (old) {
    mode = old->st_mode & 07777;
  } else {
    mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  bool ok = ::fchmod(fd, mode) == 0 && write_all(fd, bytes) && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return write_error(path, err);
  }
  return Status::ok();
}

}  // namespace

uint64_t max_tensor_bytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t(4) << 30;
  return uint64_t(pages) * uint64_t(page_size) / 2;
}

std::string format_byte_size(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

Status read_some(std::FILE* f, const std::string& name, uint64_t n, std::string* out) {
  char buffer[1 << 16];
  while (n > 0) {
    size_t want = n < sizeof buffer ? static_cast<size_t>(n) : sizeof buffer;
    size_t got = std::fread(buffer, 1, want, f);
    out->append(buffer, got);
    n -= got;
    if (got < want) break;
  }
  if (std::ferror(f)) return Status::invalid("cannot read '" + name + "': " + reason(errno));
  return Status::ok();
}

Expected<std::string> read_stream(std::FILE* f, const std::string& name, uint64_t max_bytes, bool text) {
  std::string bytes;
  // One byte past the limit tells "exactly at the limit" from "over it". Text is read in
  // pieces so that a NUL byte (a binary file, /dev/zero) stops the read at once.
  const uint64_t piece = text ? uint64_t(1) << 16 : max_bytes + 1;
  while (bytes.size() <= max_bytes) {
    size_t before = bytes.size();
    FUSEBOX_RETURN_IF_ERROR(read_some(f, name, std::min(piece, max_bytes + 1 - before), &bytes));
    if (text) {
      size_t nul = bytes.find('\0', before);
      if (nul != std::string::npos) {
        return Status::invalid("'" + name + "' is not a text file: it has a NUL byte at offset " + std::to_string(nul));
      }
    }
    if (bytes.size() == before || std::feof(f)) break;
  }
  if (bytes.size() > max_bytes) return Status::invalid(too_large(name, max_bytes));
  return bytes;
}

Expected<InputFile> open_for_read(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::invalid("'" + path + "' is a directory, not a file");
  }
  InputFile f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) {
    int err = errno;
    if (err == ENOENT) return Status::not_found("cannot open '" + path + "': " + reason(err));
    return Status::invalid("cannot open '" + path + "': " + reason(err));
  }
  return f;
}

Expected<std::string> read_file(const std::string& path, uint64_t max_bytes, bool text) {
  struct stat st;
  // fopen succeeds on a directory and the read fails later with a vaguer message.
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::invalid("'" + path + "' is a directory, not a file");
    if (S_ISREG(st.st_mode) && uint64_t(st.st_size) > max_bytes) return Status::invalid(too_large(path, max_bytes));
  }
  FUSEBOX_ASSIGN_OR_RETURN(InputFile f, open_for_read(path));
  return read_stream(f.get(), path, max_bytes, text);
}

Status write_file(const std::string& path, std::string_view bytes) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return write_error(path, errno);
    return write_replacing(path, bytes, nullptr);
  }
  if (S_ISREG(st.st_mode)) return write_replacing(path, bytes, &st);
  if (S_ISDIR(st.st_mode)) return Status::invalid("cannot write '" + path + "': it is a directory");
  if (S_ISLNK(st.st_mode)) {
    // Follow the link as open() would; a link to a directory is refused like the directory.
    struct stat target;
    if (::stat(path.c_str(), &target) == 0 && S_ISDIR(target.st_mode)) {
      return Status::invalid("cannot write '" + path + "': it links to a directory");
    }
    return write_through(path, bytes);
  }
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) return write_through(path, bytes);
  return Status::invalid("cannot write '" + path + "': it is not a regular file, symlink, FIFO or character device");
}

}  // namespace fusebox
