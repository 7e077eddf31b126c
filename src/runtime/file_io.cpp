#include "runtime/file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

namespace fusebox {

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

std::string reason() { return std::strerror(errno); }

}  // namespace

Expected<std::string> read_file(const std::string& path) {
  std::error_code ec;
  // fopen succeeds on a directory and the read fails later with a vaguer message.
  if (std::filesystem::is_directory(path, ec)) return Status::invalid("'" + path + "' is a directory, not a file");
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    int err = errno;
    std::string why = std::strerror(err);
    if (err == ENOENT) return Status::not_found("cannot open '" + path + "': " + why);
    return Status::invalid("cannot open '" + path + "': " + why);
  }
  std::string bytes;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, f.get())) > 0) bytes.append(buffer, n);
  if (std::ferror(f.get())) return Status::invalid("cannot read '" + path + "': " + reason());
  return bytes;
}

Status write_file(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  {
    File f(std::fopen(tmp.c_str(), "wb"));
    if (!f) return Status::invalid("cannot write '" + path + "': " + reason());
    bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f.get()) == bytes.size();
    ok = std::fflush(f.get()) == 0 && ok;
    if (!ok) {
      std::string why = reason();
      f.reset();
      std::remove(tmp.c_str());
      return Status::invalid("cannot write '" + path + "': " + why);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = reason();
    std::remove(tmp.c_str());
    return Status::invalid("cannot write '" + path + "': " + why);
  }
  return Status::ok();
}

}  // namespace fusebox
