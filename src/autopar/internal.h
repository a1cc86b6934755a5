// Shared by the files of src/autopar/ (not part of its interface).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "autopar/shard.h"

namespace meshc::autopar {

/// The texts of the files with sites, each `auto` replaced by the candidate `choice[i]`
/// of site i, by canonical path. `originals` holds each file's text.
std::map<std::string, std::string> rewrite(const std::vector<Site>& sites, const std::vector<int>& choice,
                                           const std::map<std::string, std::string>& originals);

/// Checks the program with `overlays` (the rewritten files, and options.overlays) through
/// autodiff, and reads explain's totals.
/// `verify`: run the GIR verifier after inference and after autodiff (the search checks
/// candidates without it, for speed; the plan it answers is checked with it).
Evaluation evaluate(const ShardOptions& options, const std::map<std::string, std::string>& overlays, bool verify);

}  // namespace meshc::autopar
