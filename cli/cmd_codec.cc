// `speckv codec ...` arrives with the codec (issue 3).
#include "commands.h"

namespace speckv_cli {
void register_codec_commands(CLI::App &) {}
}  // namespace speckv_cli
