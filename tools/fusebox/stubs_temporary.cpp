// TEMPORARY: weak placeholders while the subcommands are written; removed before landing.
#include <cstdio>

#include "commands.h"

namespace fusebox::cli {
__attribute__((weak)) int cmd_run(const Args&) { std::fputs("run: not written yet\n", stderr); return 1; }
__attribute__((weak)) int cmd_opt(const Args&) { std::fputs("opt: not written yet\n", stderr); return 1; }
__attribute__((weak)) int cmd_demo(const Args&) { std::fputs("demo: not written yet\n", stderr); return 1; }
}  // namespace fusebox::cli
