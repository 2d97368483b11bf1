// PeerDirectory: a Comm's peers, found from any thread without a lock, and changed at run time
// (Comm::add_peer / remove_peer). Readers load the current snapshot (one acquire load); a
// change publishes a new one under the writers' lock. Snapshots and PeerStates are kept until
// the Comm goes: a thread may still hold an older snapshot, and a Peer& that Comm::peer()
// returned stays valid after its peer left (operations on it then fail, naming the reason).
// Each change keeps one snapshot of the directory: fine for peers that come and go by the
// thousand, not by the million.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "wcomm/comm.h"

namespace wcomm {

class PeerState;

class PeerDirectory {
 public:
  PeerDirectory();
  ~PeerDirectory();

  // Any thread, no lock.
  PeerState* find(std::string_view node_id) const;
  PeerState* find(const Peer& peer) const;  // a Peer that Comm::peer() returned: by its address
  std::vector<PeerState*> current() const;  // the peers now, in node_id order

  // Any thread, serialised among themselves. add: the state's node_id must be new (false: it
  // is there already, and the state is dropped). remove: the state that had node_id (still
  // alive), or null.
  bool add(std::unique_ptr<PeerState> state);
  PeerState* remove(std::string_view node_id);

  // Every PeerState ever added, removed ones too (closing the Comm ends them all).
  std::vector<PeerState*> all() const;
  void destroy_all();  // ~Impl: before the io_context that their sockets use

 private:
  struct Snapshot {
    std::map<std::string, PeerState*, std::less<>> by_name;
    std::unordered_map<const Peer*, PeerState*> by_address;
  };
  void publish(std::unique_ptr<Snapshot> next);  // mu_ held

  mutable std::mutex mu_;
  std::atomic<const Snapshot*> current_;
  std::vector<std::unique_ptr<const Snapshot>> snapshots_;  // every one published
  std::vector<std::unique_ptr<PeerState>> states_;           // every peer ever added
};

}  // namespace wcomm
