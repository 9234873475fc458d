#include "commands.h"
namespace speckv_cli {
void register_codec_commands(CLI::App &) {}
}
