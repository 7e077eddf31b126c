// fusebox: the command-line driver. `fusebox help` lists the subcommands.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include "commands.h"

namespace {

constexpr const char* kUsage =
    "usage: fusebox <command> [options]\n"
    "\n"
    "commands:\n"
    "  run FILE.fbir   run a program on the CPU; inputs from .npy files or a fixed seed\n"
    "  opt FILE.fbir   parse, verify, run passes and print the IR (the pass test driver)\n"
    "  explain FILE    print the fusion report: what was fused, what was not and why\n"
    "  demo            run the built-in example programs\n"
    "  preprocess IMG  crop, resize, normalise and batch a u8 image (.npy) into f32\n"
    "\n"
    "`fusebox <command> --help` describes each command's options.\n";

// Output that did not reach its destination (a full disk, a closed pipe) is a failure: flush
// now, while there is still a way to say so.
int finish(int rc) {
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    std::fprintf(stderr, "fusebox: cannot write the output: %s\n", std::strerror(errno ? errno : EIO));
    return rc == 0 ? 1 : rc;
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string cmd = argv[1];
  fusebox::cli::Args args(argv + 2, argv + argc);
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  int rc = -1;
  // No exception may end the process with an abort: a library that throws on a bad input
  // (an I/O stream, an allocation) becomes a message and a non-zero exit.
  try {
    if (cmd == "run") rc = fusebox::cli::cmd_run(args);
    if (cmd == "opt") rc = fusebox::cli::cmd_opt(args);
    if (cmd == "demo") rc = fusebox::cli::cmd_demo(args);
    if (cmd == "explain") rc = fusebox::cli::cmd_explain(args);
    if (cmd == "preprocess") rc = fusebox::cli::cmd_preprocess(args);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "fusebox: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fusebox %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "fusebox %s: error: an unknown exception\n", cmd.c_str());
    return 1;
  }
  if (rc >= 0) return finish(rc);
  std::fprintf(stderr, "fusebox: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
