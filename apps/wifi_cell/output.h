// The emulator's JSON lines, written to stdout by a thread of their own: the simulator's thread
// must never wait on the disk behind stdout (with stdout a file on ext4 while compilers wrote
// beside it, the simulator once stood still for 626 ms).
#pragma once

#include <string>

namespace wifi_cell {

// printf into a string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Queues one line (without its newline) for stdout.
void emit(std::string line);
// Writes what is queued and ends the writer; call once, before exiting.
void finish_output();

}  // namespace wifi_cell
