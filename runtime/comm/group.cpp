// GroupRegistry (see group.h).
#include "comm/group.h"

#include <algorithm>

#include "comm/comm.h"
#include "src/errors.h"
#include "src/runtime.h"
#include "src/topology.h"

namespace meshrt::comm {

std::string describe_group(const Topology& topology, const Group& g, int64_t self) {
    if (g.mesh < 0)
        return "over all " + std::to_string(g.size()) + " devices";
    const MeshInfo& mesh = topology.mesh(g.mesh);
    std::string s = "over " + mesh.name + " axes ";
    for (size_t i = 0; i < g.axes.size(); ++i)
        s += (i ? "," : "") + mesh.axis_names[size_t(g.axes[i])];
    s += " (devices ";
    constexpr size_t kShown = 16;
    for (size_t i = 0; i < g.members.size() && i < kShown; ++i)
        s += (i ? ", " : "") + std::to_string(g.members[i]);
    if (g.members.size() > kShown)
        s += ", ... (" + std::to_string(g.members.size()) + " in all)";
    const auto me = std::find(g.members.begin(), g.members.end(), self);
    if (self >= 0 && me != g.members.end())
        s += "; this one is rank " + std::to_string(me - g.members.begin());
    return s + ")";
}

GroupMember GroupRegistry::lookup(meshrt_device* dev, const char* op, int32_t mesh,
                                  std::span<const int32_t> axes) {
    // Fast path: this device has used the group before. The key is (mesh, axes), which
    // with the device's own coordinates determines the group.
    std::string key(1, char(mesh + 1));
    bool cacheable = mesh >= 0 && mesh < topology_.nmeshes();
    for (int32_t a : axes) {
        cacheable = cacheable && a >= 0 && a < 127; // one byte per axis in the key
        key += char(a);
    }
    if (cacheable) {
        auto it = dev->group_cache.find(key);
        if (it != dev->group_cache.end())
            return it->second;
    }

    // Slow path: validate, compute the group, intern it.
    if (mesh < 0 || mesh >= topology_.nmeshes())
        fail(dev, std::string(op) + ": no mesh " + std::to_string(mesh) + " (the program has " +
                      std::to_string(topology_.nmeshes()) + ")");
    const MeshInfo& info = topology_.mesh(mesh);
    const size_t naxes = info.axis_sizes.size();
    std::vector<bool> in_group(naxes, false);
    for (int32_t a : axes) {
        if (a < 0 || size_t(a) >= naxes)
            fail(dev,
                 std::string(op) + ": mesh " + info.name + " has no axis " + std::to_string(a));
        if (in_group[size_t(a)])
            fail(dev, std::string(op) + ": axis " + info.axis_names[size_t(a)] + " is named twice");
        in_group[size_t(a)] = true;
    }
    const int64_t* coords = topology_.coords(dev->index, mesh);
    if (!coords)
        fail(dev, std::string(op) + " over mesh " + info.name + ": this device is not on it");

    int64_t group_index = 0; // which group of the partition: mixed-radix over the others
    for (size_t a = 0; a < naxes; ++a)
        if (!in_group[a])
            group_index = group_index * info.axis_sizes[a] + coords[a];
    int64_t rank = 0;
    for (int32_t a : axes)
        rank = rank * info.axis_sizes[size_t(a)] + coords[a];

    std::vector<int64_t> global_key{mesh, int64_t(axes.size())};
    global_key.insert(global_key.end(), axes.begin(), axes.end());
    global_key.push_back(group_index);

    Group* group;
    {
        std::lock_guard lock(create_mutex_);
        std::unique_ptr<Group>& slot = groups_[global_key];
        if (!slot) {
            auto g = std::make_unique<Group>();
            g->mesh = mesh;
            g->axes.assign(axes.begin(), axes.end());
            int64_t n = 1;
            for (int32_t a : axes)
                n *= info.axis_sizes[size_t(a)];
            std::vector<int64_t> c(coords, coords + naxes);
            for (int64_t r = 0; r < n; ++r) {
                int64_t rest = r;
                for (size_t j = axes.size(); j-- > 0;) {
                    int64_t size = info.axis_sizes[size_t(axes[j])];
                    c[size_t(axes[j])] = rest % size;
                    rest /= size;
                }
                g->members.push_back(topology_.device_at(mesh, c));
            }
            g->state = handler_.make_group_state(*g);
            slot = std::move(g);
        }
        group = slot.get();
    }
    GroupMember member{group, rank};
    dev->group_cache.emplace(std::move(key), member);
    return member;
}

GroupMember GroupRegistry::world(meshrt_device* dev) {
    const std::string key(1, char(0));
    auto it = dev->group_cache.find(key);
    if (it != dev->group_cache.end())
        return it->second;
    Group* group;
    {
        std::lock_guard lock(create_mutex_);
        std::unique_ptr<Group>& slot = groups_[std::vector<int64_t>{-1}];
        if (!slot) {
            auto g = std::make_unique<Group>();
            g->mesh = -1;
            for (int64_t d = 0; d < topology_.ndevices(); ++d)
                g->members.push_back(d);
            g->state = handler_.make_group_state(*g);
            slot = std::move(g);
        }
        group = slot.get();
    }
    GroupMember member{group, dev->index};
    dev->group_cache.emplace(key, member);
    return member;
}

} // namespace meshrt::comm
