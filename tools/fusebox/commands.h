// The fusebox CLI's subcommands. Each takes the arguments after its name and returns the exit
// code: 0 success, 1 a user error (message on stderr), 2 wrong usage.
#pragma once

#include <string>
#include <vector>

namespace fusebox::cli {

using Args = std::vector<std::string>;

int cmd_run(const Args& args);
int cmd_opt(const Args& args);
int cmd_demo(const Args& args);
int cmd_explain(const Args& args);
int cmd_preprocess(const Args& args);
// The lazy Tensor API section of `fusebox demo` (demo_lazy.cpp); returns an exit code.
int run_lazy_demo(bool small);

}  // namespace fusebox::cli
