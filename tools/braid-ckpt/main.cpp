// braid-ckpt: inspects, verifies, exports, imports and converts braid checkpoints (see --help).
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "braid/core/command_line.h"
#include "commands.h"

namespace {

constexpr const char* kHelp =
    "usage: braid-ckpt COMMAND ARGS...\n"
    "\n"
    "PATH is a checkpoint folder (step_N) or a checkpoint directory: then its newest committed\n"
    "checkpoint (the folders are scanned; 'latest' is a hint).\n"
    "\n"
    "commands:\n"
    "  inspect PATH [--config]     metadata (step, grid, mode, sampler, files) and a table of\n"
    "                              tensors; --config also prints the stored training config\n"
    "  verify PATH [--verbose]     checks every byte: each manifest's and each slice's CRC-32C,\n"
    "                              the zero padding between slices and that nothing else is in\n"
    "                              a data file; that the slices of each tensor tile it exactly\n"
    "                              once, that the rank manifests agree and that the stored\n"
    "                              config parses; lists every problem; exit 1 if any.\n"
    "                              Identical copies (replicated parameters) are summarised;\n"
    "                              --verbose lists each\n"
    "  export PATH OUT.safetensors [--vocab-size N]\n"
    "                              writes the whole model tensors under Hugging Face GPT-2 names\n"
    "                              (GPT2LMHeadModel without 'transformer.'); the real vocabulary\n"
    "                              size comes from the stored config unless given\n"
    "  import GPT2.safetensors OUT_DIR --n-head H [--padded-vocab-multiple M] [--seed S]\n"
    "                              makes a checkpoint (step 0, weights only: the optimizer\n"
    "                              starts fresh) from Hugging Face GPT-2 weights, names with or\n"
    "                              without 'transformer.'; the shape is read off the tensors but\n"
    "                              for the head count; --seed is the data order's (default\n"
    "                              training.seed's); the padded vocabulary rows are zeros\n"
    "  convert PATH OUT_DIR --tp T --pp P [--dp D] [--virtual-stages V]\n"
    "          [--stage-layers 3,2,2,1] [--sequence-parallel]\n"
    "                              reshards offline: writes the checkpoint as the ranks of that\n"
    "                              layout would have, into OUT_DIR/step_N (with 'latest')\n"
    "  help, --help, -h            this text\n"
    "\n"
    "example:\n"
    "  braid-ckpt verify out/ckpt/tiny\n"
    "\n"
    "Exit status: 0 done, 1 failed (verify: problems found), 2 a mistake on the command line.\n";

using Command = int (*)(const std::vector<std::string>&);

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kHelp, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::map<std::string, Command> commands = {{"inspect", braid::ckpt_tool::run_inspect},
                                                   {"verify", braid::ckpt_tool::run_verify},
                                                   {"export", braid::ckpt_tool::run_export},
                                                   {"convert", braid::ckpt_tool::run_convert},
                                                   {"import", braid::ckpt_tool::run_import}};
  const auto it = commands.find(args[0]);
  if (it == commands.end()) {
    std::fprintf(
        stderr,
        "braid-ckpt: error: unknown command '%s' (inspect, verify, export, import, convert)\n%s",
        args[0].c_str(), kHelp);
    return braid::kUsageExitCode;
  }
  for (const std::string& arg : args)
    if (arg == "--help" || arg == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    }
  try {
    return it->second(std::vector<std::string>(args.begin() + 1, args.end()));
  } catch (const braid::UsageError& e) {
    std::fprintf(stderr, "braid-ckpt %s: error: %s\n%s", args[0].c_str(), e.what(), kHelp);
    return braid::kUsageExitCode;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid-ckpt %s: error: %s\n", args[0].c_str(), e.what());
    return 1;
  }
}
