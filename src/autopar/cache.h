// The answers of `with auto` solves kept on disk, so that `check`, `explain`, `build` and
// `run` of an unchanged program (the same texts and the same options) solve once. A cache
// entry holds the chosen layout of every site by file and `auto` offset; it is used only
// when each offset still holds an `auto` of the file's text, and any entry that cannot be
// read is ignored (the program is solved again). Writes go through a temporary and a
// rename, so readers never see half an entry.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "support/source_manager.h"
#include "syntax/parser.h"

namespace meshc::autopar {

using ChosenLayouts = std::map<std::string, syntax::AutoLayouts>;  // by canonical path

/// The entry at `file`, checked against the texts in `sources` (nullopt: none usable).
std::optional<ChosenLayouts> load_cached(const std::string& file, const SourceManager& sources);

/// Writes `chosen` to `file` (best effort: a failure leaves no entry).
void store_cached(const std::string& file, const ChosenLayouts& chosen);

}  // namespace meshc::autopar
