#include <cstdio>
#include <map>

#include "shardpack/manifest.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  using namespace shardpack::cli;
  CLI::App app{"shardpack: pre-decoded image shards for GPU training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "shardpack " + std::string(shardpack::Version()));
  std::map<CLI::App*, std::function<int()>> commands;
  auto add = [&](std::function<int()> run) {
    commands[app.get_subcommands({}).back()] = std::move(run);
  };
  add(AddConvert(app));
  add(AddVerify(app));
  add(AddInfo(app));
  add(AddPreview(app));
  add(AddBench(app));
  add(AddAdopt(app));
  add(AddMerge(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  for (auto& [sub, run] : commands) {
    if (sub->parsed()) return run();
  }
  return kExitUsage;
}
