#include "backends/cuda/loader.h"

#include <dlfcn.h>
#include <glob.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace fusebox::cuda {

namespace {

std::vector<std::string> split_path(const char* list) {
  std::vector<std::string> dirs;
  if (!list) return dirs;
  std::string_view s(list);
  while (!s.empty()) {
    const size_t colon = s.find(':');
    std::string_view dir = s.substr(0, colon);
    if (!dir.empty()) dirs.emplace_back(dir);
    if (colon == std::string_view::npos) break;
    s.remove_prefix(colon + 1);
  }
  return dirs;
}

std::vector<std::string> wheel_dirs(const char* wheel) {
  std::vector<std::string> dirs;
  for (const char* root : {"/usr/lib", "/usr/local/lib", "/opt/*/.venv/lib", "/opt/*/lib", "/root/.local/lib"}) {
    for (const char* kind : {"site-packages", "dist-packages"}) {
      const std::string pattern = std::string(root) + "/python3*/" + kind + "/nvidia/" + wheel + "/lib";
      glob_t g{};
      if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) dirs.emplace_back(g.gl_pathv[i]);
      }
      globfree(&g);
    }
  }
  return dirs;
}

}  // namespace

Expected<void*> open_library(const LibrarySpec& spec) {
  std::string last_error;
  auto try_open = [&](const std::string& path) -> void* {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      const char* e = dlerror();
      last_error = e ? e : "unknown dlopen error";
    }
    return h;
  };
  std::string searched;
  std::vector<std::string> seen;
  auto search_dirs = [&](const std::vector<std::string>& dirs) -> void* {
    for (const std::string& dir : dirs) {
      if (std::find(seen.begin(), seen.end(), dir) != seen.end()) continue;
      seen.push_back(dir);
      searched += (searched.empty() ? "" : ", ") + dir;
      for (const char* so : spec.sonames) {
        if (void* h = try_open(dir + "/" + so)) return h;
      }
    }
    return nullptr;
  };
  const char* env = std::getenv("FUSEBOX_CUDA_LIBRARY_PATH");
  if (void* h = search_dirs(split_path(env))) return h;
  searched += std::string(searched.empty() ? "" : ", ") + "the dynamic linker's path";
  for (const char* so : spec.sonames) {
    if (void* h = try_open(so)) return h;
  }
  std::vector<std::string> toolkit;
  if (const char* home = std::getenv("CUDA_HOME")) toolkit.push_back(std::string(home) + "/lib64");
  toolkit.insert(toolkit.end(), {"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"});
  if (void* h = search_dirs(toolkit)) return h;
  if (spec.python_wheels && spec.wheel) {
    if (void* h = search_dirs(wheel_dirs(spec.wheel))) return h;
  }
  std::string names;
  for (const char* so : spec.sonames) names += (names.empty() ? "" : " or ") + std::string(so);
  return Status::unimplemented(std::string("cannot load ") + spec.what + " (" + names + "): searched " + searched +
                             (env ? "" : " (FUSEBOX_CUDA_LIBRARY_PATH is unset)") + "; last error: " + last_error);
}

Expected<void*> find_symbol(void* handle, const char* what, const char* symbol) {
  dlerror();
  void* p = dlsym(handle, symbol);
  if (!p) return Status::unimplemented(std::string(what) + " has no symbol " + symbol + " (too old a version?)");
  return p;
}

}  // namespace fusebox::cuda
