// The public entry points of shardpack/remote.h.
#include "shardpack/remote.h"

#include <strings.h>

#include "format/format.h"
#include "io/env.h"
#include "remote/http.h"
#include "remote/shard_cache.h"

namespace shardpack {

bool IsRemotePath(std::string_view path) {
  auto starts = [&](std::string_view scheme) {
    return path.size() > scheme.size() &&
           ::strncasecmp(path.data(), scheme.data(), scheme.size()) == 0;
  };
  return starts("http://") || starts("https://") || starts("s3://");
}

StatusOr<Manifest> FetchManifest(const std::string& url, const RemoteOptions& options) {
  SHARDPACK_ASSIGN_OR_RETURN(std::string base, remote::NormalizeDatasetUrl(url));
  SHARDPACK_ASSIGN_OR_RETURN(auto client, remote::HttpClient::Create(options));
  const std::string manifest_url = base + "/" + std::string(format::kManifestName);
  SHARDPACK_ASSIGN_OR_RETURN(std::string text, client->Get(manifest_url, kMaxManifestBytes));
  return ParseManifest(text, manifest_url);
}

StatusOr<Manifest> LoadManifest(const std::string& path, const RemoteOptions& options) {
  SHARDPACK_RETURN_IF_ERROR(io::CheckPathScheme(path, io::PathKind::kDataset));
  return IsRemotePath(path) ? FetchManifest(path, options) : ReadManifest(path);
}

}  // namespace shardpack
