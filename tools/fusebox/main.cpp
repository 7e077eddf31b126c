// fusebox: the command-line driver. `fusebox help` lists the subcommands.
#include <cstdio>
#include <cstring>
#include <exception>
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
    "\n"
    "`fusebox <command> --help` describes each command's options.\n";

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
  try {
    if (cmd == "run") return fusebox::cli::cmd_run(args);
    if (cmd == "opt") return fusebox::cli::cmd_opt(args);
    if (cmd == "demo") return fusebox::cli::cmd_demo(args);
    if (cmd == "explain") return fusebox::cli::cmd_explain(args);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "fusebox: out of memory\n");
    return 1;
  }
  std::fprintf(stderr, "fusebox: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
