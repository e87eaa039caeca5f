// The `flashbuf` command line: entry point and subcommand dispatch.
//   flashbuf run      the embedded default problems, verified and timed (no arguments needed)
//   flashbuf verify   random problems of every feature against the float64 reference
//   flashbuf bench    the BENCH.md grid, JSON results
// Exit status: 0 success, 1 a check failed or a runtime error, 2 bad arguments.
#include <cstdio>
#include <string>
#include <vector>

#include "cli.hpp"

namespace {

constexpr const char* kUsage =
    "usage: flashbuf <command> [options]\n"
    "\n"
    "commands:\n"
    "  run      run the default prefill and decode problems (GPU if present, else CPU),\n"
    "           check them against a float64 reference, print time and throughput\n"
    "  verify   random problems of every feature against the float64 reference\n"
    "  bench    the benchmark grid of BENCH.md, JSON results\n"
    "  info     what this build contains\n"
    "\n"
    "flashbuf <command> --help describes each command's options.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace flashbuf;
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string command_line = "flashbuf";
  for (const auto& a : args) command_line += " " + a;
  try {
    if (args.empty()) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    const std::string command = args[0];
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (command == "--help" || command == "-h" || command == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (command == "run") return cli::cmd_run(rest);
    if (command == "verify") return cli::cmd_verify(rest);
    if (command == "bench") return cli::cmd_bench(rest, command_line);
    if (command == "info" || command == "--version") {
      if (!rest.empty()) throw cli::UsageError("'" + command + "' takes no arguments");
      std::fputs(build_info().c_str(), stdout);
      std::printf("  CUDA GPU present: %s\n", cuda_available() ? cuda_device_info(0).name.c_str() : "no");
      return 0;
    }
    throw cli::UsageError("unknown command '" + command + "' (expected run, verify, bench or info; see flashbuf --help)");
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "flashbuf: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flashbuf: error: %s\n", e.what());
    return 1;
  }
}
