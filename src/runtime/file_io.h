// Whole-file reads and writes with the user-error channel: a missing file, a directory or a
// failed write comes back as a Status naming the path and the system's reason.
#pragma once

#include <string>
#include <string_view>

#include "fusebox/status.h"

namespace fusebox {

// The file's bytes. Errors: not found, not a regular file, a read failure.
Expected<std::string> read_file(const std::string& path);

// Writes through "<path>.tmp" and a rename, so a reader never sees half a file and a failed
// write leaves no partial file behind.
Status write_file(const std::string& path, std::string_view bytes);

}  // namespace fusebox
