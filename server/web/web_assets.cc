// Looks an embedded file up by path (see web_assets.h).
#include "server/web/web_assets.h"

namespace zshard::server::web {

const WebAsset* FindWebAsset(const std::string& path) {
  for (size_t i = 0; i < kWebAssetCount; ++i) {
    if (path == kWebAssets[i].path) return &kWebAssets[i];
  }
  return nullptr;
}

}  // namespace zshard::server::web
