// Device groups of collectives, computed in common code for every handler. A group is
// the set of devices of one mesh whose coordinates agree on every axis outside `axes`;
// a member's rank is mixed-radix over `axes` in the order given. Groups are interned by
// a GroupRegistry the first time any member asks (a lock only then); each device keeps
// its own cache keyed by (mesh, axes), so a collective's lookup takes no lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "meshrt.h"

namespace meshrt {
class Topology;
}

namespace meshrt::comm {

class CommHandler;

/// What a handler keeps per group (the sim handler's rendezvous, an MPI communicator,
/// an NCCL communicator).
class GroupState {
public:
    virtual ~GroupState() = default;
};

struct Group {
    int32_t mesh = -1;            // -1: every device of the program (broadcast_all, save)
    std::vector<int32_t> axes;    // the axes the group spans, most significant first
    std::vector<int64_t> members; // device indices, by rank
    std::unique_ptr<GroupState> state;

    int64_t size() const { return int64_t(members.size()); }
};

struct GroupMember {
    Group* group = nullptr;
    int64_t rank = 0;
};

/// "over Pod axes data (devices 0, 4; this one is rank 1)", "over all 8 devices": a
/// group for messages (at most 16 members listed). `self`: the device the message is
/// from, -1 for none.
std::string describe_group(const Topology& topology, const Group& g, int64_t self);

class GroupRegistry {
public:
    GroupRegistry(const Topology& topology, CommHandler& handler)
        : topology_(topology), handler_(handler) {}

    /// The calling device's group over `axes` of `mesh` and its rank there. Fails the
    /// run when the request is malformed (axis out of range or repeated) or the device
    /// is not on the mesh: both are compiler bugs.
    GroupMember lookup(meshrt_device* dev, const char* op, int32_t mesh,
                       std::span<const int32_t> axes);
    /// Every device of the program, rank = device index.
    GroupMember world(meshrt_device* dev);

private:
    const Topology& topology_;
    CommHandler& handler_;
    std::mutex create_mutex_; // held only while a group is created
    std::map<std::vector<int64_t>, std::unique_ptr<Group>> groups_;
};

} // namespace meshrt::comm
