// droce-run: runs an unmodified RDMA program on droce (docs/VERBS.md):
//   droce-run --config droce.toml -- ib_write_bw -x 1 ...
// checks the configuration, then executes the program with libdroce-verbs
// preloaded (LD_PRELOAD) and DROCE_VERBS_CONFIG naming the file. No DPDK
// here: the program's own process starts it, through the library.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_error.h"
#include "droce/verbs/config.h"

namespace {

constexpr const char* kApp = "droce-run";

// libdroce-verbs: --lib, $DROCE_VERBS_LIB, the build tree's (this program
// in build/apps, the library in build/src/verbs), the installed one.
std::string find_library(const std::string& given) {
  namespace fs = std::filesystem;
  if (!given.empty()) return given;
  if (const char* env = std::getenv("DROCE_VERBS_LIB"); env && *env) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path built = self.parent_path().parent_path() / "src/verbs/libdroce-verbs.so";
    if (fs::exists(built, ec)) return built.string();
  }
  return DROCE_VERBS_INSTALLED;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"Run an unmodified RDMA (libibverbs) program on droce."};
  std::string config, lib;
  std::vector<std::string> command;
  cli.add_option("--config", config, "TOML configuration of the droce device (docs/VERBS.md)")
      ->required();
  cli.add_option("--lib", lib, "libdroce-verbs.so to preload (default: the build's or the "
                               "installed one)");
  cli.add_option("command", command, "the program and its arguments, after --")->required();
  cli.positionals_at_end(true);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return droce::apps::cli_exit(cli, e, kApp);
  }
  // A mistake is reported here, before the program starts, in the words
  // the library would use.
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path abs = fs::absolute(config, ec);
  setenv("DROCE_VERBS_CONFIG", abs.c_str(), 1);
  try {
    droce::verbs::load_config_from_env();
  } catch (const droce::ConfigError& e) {
    if (e.option() == "DROCE_VERBS_CONFIG")
      fmt::print(stderr, "{}: --config: cannot read '{}'\n", kApp, config);
    else
      fmt::print(stderr, "{}: --config: {}: {}\n", kApp, config, e.what());
    return 2;
  }
  const std::string so = find_library(lib);
  if (!fs::exists(so, ec)) {
    fmt::print(stderr, "{}: --lib: no library at '{}'\n", kApp, so);
    return 2;
  }
  std::string preload = fs::absolute(so, ec).string();
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  std::vector<char*> args;
  for (std::string& a : command) args.push_back(a.data());
  args.push_back(nullptr);
  execvp(args[0], args.data());
  fmt::print(stderr, "{}: cannot run '{}': {}\n", kApp, command[0], std::strerror(errno));
  return errno == ENOENT ? 127 : 126;
}
