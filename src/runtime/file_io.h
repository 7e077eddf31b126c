// Whole-file reads and writes with the user-error channel: a missing file, a directory, a file
// over the size limit or a failed write comes back as a Status naming the path and the reason.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "fusebox/status.h"

namespace fusebox {

// Reads stop here unless told otherwise: /dev/zero or a runaway pipe must be an error, not a
// process that reads until memory runs out.
constexpr uint64_t kMaxTextBytes = uint64_t(1) << 30;  // 1 GiB

// The largest tensor the CLI will read or draw: half the physical memory (so a bad size is a
// message, not the machine swapping), or 4 GiB where the system does not say.
uint64_t max_tensor_bytes();

// "1.0 GiB", "512 MiB", "12 B": for limit messages.
std::string format_byte_size(uint64_t bytes);

// The file's bytes. Errors: not found, a directory, a read failure, more than max_bytes, and
// with `text` a NUL byte (a binary file or /dev/zero fails at once, not after max_bytes).
Expected<std::string> read_file(const std::string& path, uint64_t max_bytes = kMaxTextBytes, bool text = false);

// All of a stream (standard input), at most max_bytes; `name` is for messages.
Expected<std::string> read_stream(std::FILE* f, const std::string& name, uint64_t max_bytes = kMaxTextBytes,
                                  bool text = false);

// An open file for bounded reads with read_some.
using InputFile = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;
// Opens a file for reading; the same errors as read_file (a directory, not found).
Expected<InputFile> open_for_read(const std::string& path);

// Appends up to n bytes of an open stream to *out (fewer only at its end). For formats whose
// header says how much follows (.npy).
Status read_some(std::FILE* f, const std::string& name, uint64_t n, std::string* out);

// Writes `bytes` to the named path as given:
//  - a new path or an existing regular file: through a fresh temporary file in the same folder
//    (created O_EXCL, so a planted "<path>.tmp" or symlink is never followed) renamed over the
//    path, so a reader never sees half a file and a failed write leaves the old one; an
//    existing file keeps its permission bits;
//  - a symlink, FIFO or device (/dev/stdout, a pipe from the shell): opened and written
//    through (O_TRUNC), never replaced by a regular file;
//  - a directory or anything else: refused.
Status write_file(const std::string& path, std::string_view bytes);

}  // namespace fusebox
