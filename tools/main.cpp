// The `flashbuf` command line: entry point and subcommand dispatch (CLI11).
//   flashbuf run      the embedded default problems, verified and timed (no arguments needed)
//   flashbuf verify   random problems of every feature against the float64 reference
//   flashbuf bench    the benchmark grid of docs/BENCH.md: a table, and JSON results
//   flashbuf info     what this build contains
// Conventions of common command-line tools: -h/--help on every command (exit 0), unknown
// options and repeated options are errors, a bad value names its option.
// Exit status: 0 success, 1 a check failed or a runtime error, 2 bad arguments.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "tuning_env.hpp"

namespace {

constexpr const char* kFooter =
    "flashbuf <command> --help describes each command's options.\n"
    "Exit status: 0 success, 1 a check failed or a runtime error, 2 bad arguments.\n"
    "Benchmark grid and protocol: docs/BENCH.md; the library's layers: docs/DESIGN.md.";

// CLI11 keeps what it does not recognise (allow_extras) so that the message can say which
// option is unknown and where to look, rather than a list of "arguments not expected".
void reject_extras(const CLI::App& command, const std::string& name) {
  const std::vector<std::string> extras = command.remaining();
  if (extras.empty()) return;
  std::string first = extras.front();
  for (const std::string& e : extras) {
    if (!e.empty() && e[0] == '-') {
      first = e;
      break;
    }
  }
  const std::string see = " (see flashbuf" + (name.empty() ? std::string() : " " + name) + " --help)";
  if (!first.empty() && first[0] == '-') {
    throw flashbuf::cli::UsageError("unknown option " + first.substr(0, first.find('=')) + see);
  }
  if (name.empty()) throw flashbuf::cli::UsageError("unknown command '" + first + "'" + see);
  throw flashbuf::cli::UsageError("unexpected argument '" + first + "'" + see);
}

// Repeating a flag is a mistake as much as repeating an option with a value.
void forbid_repeats(CLI::App& command) {
  for (CLI::Option* option : command.get_options()) {
    if (option->get_name() != "--help") option->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flashbuf;
  std::string command_line = "flashbuf";
  for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
  // The subcommand named on the command line, for "see flashbuf <command> --help".
  const std::string named = argc > 1 ? argv[1] : "";

  // Tuning overrides for A/B and tuning runs come from the environment (tools/tuning_env.hpp).
  try {
    tools::apply_tuning_environment();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "flashbuf: %s\n", e.what());
    return 2;
  }

  CLI::App app{"flashbuf: exact flash attention (prefill, paged decode, merge of partial states).", "flashbuf"};
  app.footer(kFooter);
  app.allow_extras();
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the version and exit");

  cli::RunOptions run_options;
  cli::VerifyOptions verify_options;
  cli::BenchOptions bench_options;
  std::vector<std::pair<CLI::App*, std::string>> commands = {
      {cli::add_run_command(app, run_options), "run"},
      {cli::add_verify_command(app, verify_options), "verify"},
      {cli::add_bench_command(app, bench_options), "bench"},
      {app.add_subcommand("info", "what this build contains: version, CUDA architectures, kernels, and the GPU here"),
       "info"},
  };
  forbid_repeats(app);
  for (auto& [command, name] : commands) {
    command->allow_extras();
    forbid_repeats(*command);
  }

  try {
    app.parse(argc, argv);
    reject_extras(app, "");
    for (auto& [command, name] : commands) {
      if (command->parsed()) reject_extras(*command, name);
    }
    if (version) {
      std::printf("flashbuf %s\n", FLASHBUF_VERSION_STRING);
      return 0;
    }
    for (auto& [command, name] : commands) {
      if (!command->parsed()) continue;
      if (name == "run") return cli::cmd_run(run_options);
      if (name == "verify") return cli::cmd_verify(verify_options);
      if (name == "bench") return cli::cmd_bench(bench_options, command_line);
      std::fputs(build_info().c_str(), stdout);
      std::printf("  CUDA GPU present: %s\n", cuda_available() ? cuda_device_info(0).name.c_str() : "no");
      return 0;
    }
    std::fputs(app.help().c_str(), stderr);
    return 2;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);  // the help of the command that asked, on stdout; exit status 0
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11's messages name the option ("--backend: tpu not in {auto,cpu,gpu}"); a repeated
    // option is said in plain words rather than as an argument count.
    bool known = false;
    for (auto& [command, name] : commands) known = known || name == named;
    const std::string where = known ? " " + named : "";
    std::string message = e.what();
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
      const std::size_t colon = message.find(':');
      if (message.find(" missing") != std::string::npos && colon != std::string::npos) {
        message = message.substr(0, colon) + " needs a value";
      }
      for (auto& [command, name] : commands) {
        for (const CLI::Option* option : command->get_options()) {
          if (option->count() > 1) {
            message = option->get_name() + " was given " + std::to_string(option->count()) + " times; give it once";
          }
        }
      }
    }
    std::fprintf(stderr, "flashbuf%s: %s (see flashbuf%s --help)\n", where.c_str(), message.c_str(), where.c_str());
    return 2;
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "flashbuf: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flashbuf: error: %s\n", e.what());
    return 1;
  }
}
