// Newline-delimited text over a stream socket: the small JSON-lines handshakes beside COMM v1
// (the collectives' rendezvous, the benchmark's load traffic). One reader and one writer for
// both, with one error model: a Result whose Error says what happened; each caller adds whom
// it was talking to.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "wcomm/deadline.h"
#include "wcomm/errors.h"

namespace wcomm {

// One '\n'-terminated line, without the '\n'. Read a byte at a time, so that nothing past the
// line is consumed (the socket may carry other bytes after it). Fails with kOperationTimeout
// once deadline passes (max: no deadline), kConnectionClosed when the stream ends first or a
// read fails (the reason in words), kProtocol for a line longer than max_bytes.
Result<std::string> read_line(int fd, SteadyClock::time_point deadline, std::size_t max_bytes);

// Writes all of data (no SIGPIPE); kConnectionClosed with the reason if the socket fails.
Status write_all(int fd, std::string_view data);

}  // namespace wcomm
