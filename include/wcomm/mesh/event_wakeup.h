// EventWakeup: a Linux eventfd another thread signals to end a communicator's poll early
// (the seed's EventWakeup; register it with Communicator::register_event_for_poll).
#pragma once

namespace wcomm::mesh {

// Non-blocking, close-on-exec. set() may be called from any thread; drain() by the thread
// that polls. Not copyable: it owns its descriptor.
class EventWakeup {
 public:
  EventWakeup();  // throws std::system_error when the kernel refuses an eventfd
  ~EventWakeup();
  EventWakeup(const EventWakeup&) = delete;
  EventWakeup& operator=(const EventWakeup&) = delete;

  int fd() const { return fd_; }
  void set();    // adds 1 to the counter: a poll waiting on fd() ends
  bool drain();  // resets the counter; true if it had been set ("would block" is not an error)

 private:
  int fd_ = -1;
};

}  // namespace wcomm::mesh
