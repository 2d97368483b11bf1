// One collective call in progress: its deadline, its tag block, the Comm operations it has in
// flight (so an abort from another rank can cancel them, and a failed call can wait for them
// to end), and the conversion of any failure into the CollectiveError every rank reports.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wcomm/collectives/group.h"

namespace wcomm {

// Tags: collective calls use 0xC0000000 | (seq mod 2048) << 16 | step; aborts 0xCFFF0000;
// point-to-point sends 0xD0000000 | user tag.
inline constexpr std::uint32_t kCollectiveTagBase = 0xC0000000u;
inline constexpr std::uint32_t kAbortTag = 0xCFFF0000u;
inline constexpr std::uint32_t kP2PTagBase = 0xD0000000u;
inline constexpr std::uint32_t kMaxSteps = 1u << 16;

// The group's failure, sticky once set; shared with the abort listeners' callbacks.
struct Group::FailState {
  std::mutex mu;
  std::condition_variable aborted;  // notified when an abort from another rank sets `error`
  std::optional<CollectiveError> error;          // the first failure
  std::uint32_t error_seq = 0;                   // the collective call it happened in
  std::vector<std::function<void()>> cancel_ops;  // of the call in flight
  bool closed = false;
};

struct Group::Call {
  using Clock = std::chrono::steady_clock;

  // Starts a call named `what` (e.g. "allreduce(sum, float32 x 1000)"): fails at once if the
  // group is already broken.
  Call(Group& group, std::string what, const CallOptions& options, bool collective);
  // A call left by an exception first waits for every operation it started (settle()): they
  // read and write the caller's tensors, which the caller may free once the call has thrown.
  ~Call();

  // The tag of step `step` of this call (collective) or the p2p tag.
  std::uint32_t tag(std::uint32_t step) const;
  // The piggypayload every message of this call carries: its description, so a rank that
  // called something else (another size, dtype, op or root) is caught.
  const Value& signature() const { return signature_; }
  std::optional<Seconds> remaining() const;

  // Posts a send of tensor's memory (borrowed) to rank, or a recv straight into `into`.
  Future<SendResult> send(int rank, const Tensor& tensor, std::uint32_t step);
  Future<SendResult> send_value(int rank, Value value, std::uint32_t step);
  Future<Received> recv_into(int rank, const Tensor& into, std::uint32_t step);
  Future<Received> recv(int rank, std::uint32_t step);
  // Waits for an operation with rank; a failure becomes the CollectiveError (after telling
  // every other rank), thrown.
  void wait(Future<SendResult>& f, int rank);
  void wait(Future<Received>& f, int rank);
  void wait_all(std::vector<Future<SendResult>>& fs, const std::vector<int>& ranks);

  // Throws the CollectiveError for a failure seen here: records it, tells the other ranks.
  [[noreturn]] void fail(ErrorCode code, int rank, const std::string& message);
  // The same for an operation with `rank` that failed with `error` (action: "sending to" /
  // "receiving from"); an abort that came first wins.
  [[noreturn]] void fail_from(const Error& error, int rank, const char* action);
  // Why a received message does not belong to this call (another call's signature), or "".
  std::string signature_problem(const Received& got, int rank) const;

  Group& group;
  std::string what;
  Clock::time_point deadline;
  std::uint32_t seq = 0;
  bool collective;

 private:
  template <class T>
  void track(Future<T>& f, int rank);
  void check_signature(const Received& got, int rank);
  // Cancels what this call started and waits until all of it has ended (see call.cpp).
  void settle() noexcept;
  Value signature_;
  Seconds timeout_;
  // The collective operations this call started, with their rank, for settle().
  std::vector<std::pair<int, Future<SendResult>>> sends_;
  std::vector<std::pair<int, Future<Received>>> recvs_;
  int uncaught_ = std::uncaught_exceptions();  // more in ~Call: left by an exception
};

}  // namespace wcomm
