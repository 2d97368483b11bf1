#include "bridge.h"

#include <functional>

#include <ns3/event-impl.h>
#include <ns3/mac48-address.h>
#include <ns3/simulator.h>

namespace wifi_cell {

using namespace ns3;

namespace {

// An event that runs a closure (ns-3 3.37's Schedule takes functions and methods, not lambdas).
class Closure : public EventImpl {
 public:
  explicit Closure(std::function<void()> f) : f_(std::move(f)) {}

 private:
  void Notify() override { f_(); }
  std::function<void()> f_;
};

void after(Time delay, std::function<void()> f) {
  if (delay.IsZero())
    f();
  else
    Simulator::Schedule(delay, Ptr<EventImpl>(Create<Closure>(std::move(f))));
}

// Writes a frame from the air to a TAP, keeping its Ethernet addresses.
void to_tap(Ptr<FdNetDevice> tap, Ptr<Packet> frame, Address from, Address to, uint16_t protocol,
            FrameCounters& counters) {
  if (tap->SendFrom(frame, from, to, protocol))
    ++counters.from_air;
  else
    ++counters.refused;
}

}  // namespace

void bridge_station(Ptr<FdNetDevice> tap, Ptr<WifiNetDevice> radio, FrameCounters& counters) {
  tap->SetAddress(radio->GetAddress());
  tap->SetPromiscReceiveCallback([radio, &counters](Ptr<NetDevice>, Ptr<const Packet> frame, uint16_t protocol,
                                                    const Address& from, const Address& to, NetDevice::PacketType) {
    if (Mac48Address::ConvertFrom(from) != Mac48Address::ConvertFrom(radio->GetAddress())) {
      ++counters.foreign_source;
      return true;
    }
    if (radio->Send(frame->Copy(), to, protocol))
      ++counters.to_air;
    else
      ++counters.refused;
    return true;
  });
  radio->SetPromiscReceiveCallback([tap, &counters](Ptr<NetDevice>, Ptr<const Packet> frame, uint16_t protocol,
                                                    const Address& from, const Address& to, NetDevice::PacketType) {
    to_tap(tap, frame->Copy(), from, to, protocol, counters);
    return true;
  });
}

void bridge_ap_host(Ptr<FdNetDevice> tap, Ptr<WifiNetDevice> ap, Time delay, FrameCounters& counters) {
  tap->SetPromiscReceiveCallback([ap, delay, &counters](Ptr<NetDevice>, Ptr<const Packet> frame, uint16_t protocol,
                                                        const Address& from, const Address& to, NetDevice::PacketType) {
    Ptr<Packet> copy = frame->Copy();
    auto send = [ap, copy, from, to, protocol, &counters] {
      if (ap->SendFrom(copy, from, to, protocol))
        ++counters.to_air;
      else
        ++counters.refused;
    };
    after(delay, send);
    return true;
  });
  // Everything the access point passes up: frames for the host, and broadcasts (ARP).
  ap->SetPromiscReceiveCallback([tap, delay, &counters](Ptr<NetDevice>, Ptr<const Packet> frame, uint16_t protocol,
                                                        const Address& from, const Address& to, NetDevice::PacketType) {
    Ptr<Packet> copy = frame->Copy();
    after(delay, [=, &counters] { to_tap(tap, copy, from, to, protocol, counters); });
    return true;
  });
}

}  // namespace wifi_cell
