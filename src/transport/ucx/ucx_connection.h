// The Connection over a UCP endpoint (see ucx_hub.h for the data path).
#pragma once

#include <memory>
#include <string>

#include "transport/transport.h"
#include "transport/ucx/ucx_hub.h"

namespace wcomm::transport::ucx {

std::unique_ptr<Connection> make_connection(std::shared_ptr<Hub> hub, std::shared_ptr<Channel> channel,
                                            std::string description);

}  // namespace wcomm::transport::ucx
