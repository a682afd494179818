// The dashboard page's static files (web/), compiled into the coordinator:
// a table generated at build time (cmake/embed_web.cmake) from web/src and
// the pinned npm packages (web/package-lock.json).
#pragma once

#include <cstddef>
#include <string>

namespace zshard::server::web {

struct WebAsset {
  // Relative to /, e.g. "index.html", "vendor/uPlot.iife.min.js".
  const char* path;
  const char* content_type;
  const unsigned char* data;
  size_t size;
};

// The generated table (web_assets_data.cc) and its length.
extern const WebAsset kWebAssets[];
extern const size_t kWebAssetCount;

// The asset at `path` (no leading slash), or null.
const WebAsset* FindWebAsset(const std::string& path);

}  // namespace zshard::server::web
