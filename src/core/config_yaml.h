// The YAML side of the node config (wcomm/config.h) for other readers of YAML files that hold
// a node config's `comm` section (the cluster launcher's topology): one checker, the same
// messages (keys with close-name suggestions, types, ranges, the egress rules), with the line
// in the reader's own file.
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

#include "wcomm/config.h"

namespace wcomm {

// The `comm` section `comm` (null or absent: every default) of a file named `origin`;
// InvalidArgumentError naming origin, the key (comm.<field>), what is wrong and its line.
CommConfig parse_comm_config(const YAML::Node& comm, const std::string& origin);

}  // namespace wcomm
