#include "remote/s3_upload.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>

#include "format/format.h"
#include "io/env.h"
#include "remote/http.h"
#include "remote/shard_cache.h"
#include "shardpack/manifest.h"

namespace shardpack::remote {

namespace {

StatusOr<uint64_t> SizeFrom(uint64_t option, const GetEnvFn& getenv, const char* variable,
                            uint64_t fallback) {
  if (option > 0) return option;
  const std::string v = getenv(variable);
  if (v.empty()) return fallback;
  auto bytes = ParseByteSize(v);
  if (!bytes.ok()) return bytes.status().WithPrefix(variable);
  if (*bytes == 0) return InvalidArgumentError(std::string(variable) + ": must be above 0");
  return bytes;
}

std::string DecodeEntities(std::string_view text) {
  static const std::pair<std::string_view, char> kEntities[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  std::string out;
  for (size_t i = 0; i < text.size();) {
    bool replaced = false;
    if (text[i] == '&') {
      for (const auto& [entity, c] : kEntities) {
        if (text.substr(i, entity.size()) == entity) {
          out += c;
          i += entity.size();
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += text[i++];
  }
  return out;
}

// A file to publish: its name in the directory and the manifest's size and checksum.
struct Item {
  std::string name;
  uint64_t bytes = 0;
  std::string xxh3;
};

// One file to publish. Above the multipart threshold its parts are sent by any
// connection; the last part to end completes (or aborts) the upload.
struct FileJob {
  const Item* item = nullptr;
  bool multipart = false;
  std::vector<PartRange> parts;  // one, the whole file, when not multipart
  std::mutex mu;                 // everything below
  bool started = false;          // the record checked, the file mapped, the upload created
  bool skipped = false;          // an earlier run uploaded it (see "Resuming")
  bool finished = false;
  std::unique_ptr<io::MappedFile> file;  // null for an empty file
  std::string upload_id;
  std::vector<std::string> etags;
  size_t parts_left = 0;  // parts not yet ended
  size_t parts_sent = 0;  // parts that went up
  Status error;           // the first part's

  std::string_view Data() const {
    return file == nullptr
               ? std::string_view()
               : std::string_view(reinterpret_cast<const char*>(file->data()), file->size());
  }
};

// Uploads the files of one directory to one prefix over up to `connections` clients at
// once, a file or a part of one per client at a time; the manifest last, alone.
class Uploader {
 public:
  Uploader(std::string dir, std::string url, UploadSizes sizes, int connections,
           const RemoteOptions& options)
      : dir_(std::move(dir)),
        url_(std::move(url)),
        sizes_(sizes),
        connections_(connections),
        options_(options),
        env_(io::Env::Posix()) {}

  Status Publish(const std::vector<Item>& items, UploadSummary* summary);

 private:
  struct Work {
    FileJob* job;
    size_t part;
  };

  std::string ObjectUrl(const std::string& name) const { return url_ + "/" + name; }
  // Whether the record says `item` went up, and its object still has its size.
  StatusOr<bool> AlreadyUploaded(const Item& item, HttpClient* client);
  // Once per file, by its first part: the record, the mapping, CreateMultipartUpload.
  Status Start(FileJob* job, HttpClient* client);
  // Sends one part (or the whole object).
  Status SendPart(FileJob* job, size_t part, HttpClient* client);
  // By the last part to end: CompleteMultipartUpload, the size check and the record; or,
  // after an error or a stop, AbortMultipartUpload.
  Status Finish(FileJob* job, HttpClient* client, UploadSummary* summary);
  void Abort(FileJob* job, HttpClient* client);
  Status PutObject(const std::string& url, std::string_view data, HttpClient* client);
  Status Complete(FileJob* job, HttpClient* client);
  Status CheckSize(const std::string& url, uint64_t bytes, HttpClient* client);
  Status Record(const Item& item);

  std::string dir_;
  std::string url_;
  UploadSizes sizes_;
  const int connections_;
  const RemoteOptions& options_;
  io::Env* env_;
  std::vector<std::unique_ptr<HttpClient>> clients_;
  std::atomic<bool> stop_{false};   // a file failed: the others stop
  std::mutex mu_;                   // recorded_ and the record file; the summary
  std::set<std::string> recorded_;  // "<xxh3> <name>" lines of the upload record
};

StatusOr<bool> Uploader::AlreadyUploaded(const Item& item, HttpClient* client) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (recorded_.count(item.xxh3 + " " + item.name) == 0) return false;
  }
  HttpRequest head;
  head.method = "HEAD";
  auto r = client->Send(ObjectUrl(item.name), head);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kNotFound) return false;
    return r.status();
  }
  return r->content_length == static_cast<int64_t>(item.bytes);
}

Status Uploader::CheckSize(const std::string& url, uint64_t bytes, HttpClient* client) {
  HttpRequest head;
  head.method = "HEAD";
  SHARDPACK_ASSIGN_OR_RETURN(HttpResponse r, client->Send(url, head));
  if (r.content_length != static_cast<int64_t>(bytes)) {
    return CorruptionError(url + ": after the upload the object is " +
                           std::to_string(r.content_length) + " bytes, the file " +
                           std::to_string(bytes));
  }
  return Status::Ok();
}

Status Uploader::PutObject(const std::string& url, std::string_view data, HttpClient* client) {
  HttpRequest put;
  put.body = data;
  return client->Send(url, put).status();
}

Status Uploader::Start(FileJob* job, HttpClient* client) {
  const Item& item = *job->item;
  SHARDPACK_ASSIGN_OR_RETURN(job->skipped, AlreadyUploaded(item, client));
  if (job->skipped) return Status::Ok();
  const std::string path = io::JoinPath(dir_, item.name);
  if (item.bytes > 0) {
    SHARDPACK_ASSIGN_OR_RETURN(job->file, env_->MapFile(path, io::AccessPattern::kSequential));
  }
  if (job->Data().size() != item.bytes) {
    return CorruptionError(path + ": " + std::to_string(job->Data().size()) +
                           " bytes, the manifest says " + std::to_string(item.bytes));
  }
  if (!job->multipart) return Status::Ok();
  const std::string url = ObjectUrl(item.name);
  HttpRequest create;
  create.method = "POST";
  create.query = MultipartQuery("", 0);
  SHARDPACK_ASSIGN_OR_RETURN(HttpResponse created, client->Send(url, create));
  job->upload_id = XmlElementText(created.body, "UploadId");
  if (job->upload_id.empty()) {
    return IOError(url + ": CreateMultipartUpload answered without an UploadId");
  }
  return Status::Ok();
}

Status Uploader::SendPart(FileJob* job, size_t i, HttpClient* client) {
  const std::string url = ObjectUrl(job->item->name);
  if (!job->multipart) return PutObject(url, job->Data(), client);
  HttpRequest part;
  part.body = job->Data().substr(job->parts[i].offset, job->parts[i].size);
  part.query = MultipartQuery(job->upload_id, static_cast<int>(i + 1));
  auto r = client->Send(url, part);
  if (!r.ok()) {
    return r.status().WithPrefix("part " + std::to_string(i + 1) + " of " +
                                 std::to_string(job->parts.size()));
  }
  if (r->etag.empty()) {
    return IOError(url + ": part " + std::to_string(i + 1) + " answered without an ETag");
  }
  std::lock_guard<std::mutex> lock(job->mu);
  job->etags[i] = r->etag;
  return Status::Ok();
}

Status Uploader::Complete(FileJob* job, HttpClient* client) {
  const std::string url = ObjectUrl(job->item->name);
  const std::string xml = CompleteMultipartXml(job->etags);
  HttpRequest complete;
  complete.method = "POST";
  complete.body = xml;
  complete.query = MultipartQuery(job->upload_id, 0);
  // S3 may answer 200 and still fail: the <Error> is in the body (sent after the status,
  // while it assembles the parts).
  for (int attempt = 0;; ++attempt) {
    SHARDPACK_ASSIGN_OR_RETURN(HttpResponse r, client->Send(url, complete));
    if (r.body.find("<Error>") == std::string::npos) return Status::Ok();
    const std::string code = S3ErrorCode(r.body);
    const bool transient =
        code == "InternalError" || code == "SlowDown" || code == "ServiceUnavailable";
    if (!transient || attempt >= 3) {
      return IOError(url + ": CompleteMultipartUpload: HTTP 200 with error " +
                     (code.empty() ? std::string("(no code)") : code));
    }
  }
}

void Uploader::Abort(FileJob* job, HttpClient* client) {
  if (job->upload_id.empty()) return;
  // Parts of an upload never completed are billed until it is aborted.
  HttpRequest abort;
  abort.method = "DELETE";
  abort.query = MultipartQuery(job->upload_id, 0);
  client->Send(ObjectUrl(job->item->name), abort).status().IgnoreError();
  job->upload_id.clear();
}

Status Uploader::Finish(FileJob* job, HttpClient* client, UploadSummary* summary) {
  job->finished = true;
  const Item& item = *job->item;
  // A stop leaves parts unsent; a file whose parts all went up is still completed and
  // recorded (a rerun need not send it again).
  Status s = !job->error.ok() ? job->error
             : !job->skipped && job->parts_sent < job->parts.size()
                 ? IOError(ObjectUrl(item.name) + ": upload stopped")
                 : Status::Ok();
  if (s.ok() && !job->skipped) {
    if (job->multipart) s = Complete(job, client);
    if (s.ok()) s = CheckSize(ObjectUrl(item.name), item.bytes, client);
    if (s.ok()) s = Record(item);
  }
  if (!s.ok()) {
    Abort(job, client);
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    if (job->skipped) {
      ++summary->skipped;
    } else {
      ++summary->files;
      summary->bytes += item.bytes;
    }
  }
  job->file.reset();
  return s;
}

Status Uploader::Record(const Item& item) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string line = item.xxh3 + " " + item.name;
  recorded_.insert(line);
  std::string text;
  for (const std::string& l : recorded_) text += l + "\n";
  return io::WriteFileAtomically(env_, io::JoinPath(dir_, kUploadRecordName), text);
}

Status Uploader::Publish(const std::vector<Item>& items, UploadSummary* summary) {
  const std::string record_path = io::JoinPath(dir_, kUploadRecordName);
  if (env_->FileExists(record_path)) {
    SHARDPACK_ASSIGN_OR_RETURN(std::string text, env_->ReadFile(record_path, 64ull << 20));
    size_t start = 0;
    while (start < text.size()) {
      size_t eol = text.find('\n', start);
      if (eol == std::string::npos) eol = text.size();
      if (eol > start) recorded_.insert(text.substr(start, eol - start));
      start = eol + 1;
    }
  }
  std::vector<std::unique_ptr<FileJob>> jobs;
  std::vector<Work> work_items;
  for (const Item& item : items) {
    auto job = std::make_unique<FileJob>();
    job->item = &item;
    job->multipart = item.bytes > sizes_.multipart_threshold;
    job->parts = job->multipart ? PlanParts(item.bytes, sizes_.part_bytes)
                                : std::vector<PartRange>{{0, item.bytes}};
    job->etags.resize(job->parts.size());
    job->parts_left = job->parts.size();
    for (size_t p = 0; p < job->parts.size(); ++p) work_items.push_back({job.get(), p});
    jobs.push_back(std::move(job));
  }
  std::atomic<size_t> next{0};
  std::mutex error_mu;
  Status first_error;
  auto work = [&](HttpClient* client) {
    for (size_t i; !stop_.load() && (i = next.fetch_add(1)) < work_items.size();) {
      FileJob& job = *work_items[i].job;
      Status s;
      {
        // The first part to come starts the file; the others wait for it here.
        std::lock_guard<std::mutex> lock(job.mu);
        if (!job.started) {
          job.started = true;
          job.error = Start(&job, client);
        }
        if (!job.error.ok() || job.skipped) s = job.error;
      }
      bool sent = false;
      if (s.ok() && !job.skipped && !stop_.load()) {
        s = SendPart(&job, work_items[i].part, client);
        sent = s.ok();
      }
      bool last;
      {
        std::lock_guard<std::mutex> lock(job.mu);
        if (!s.ok() && job.error.ok()) job.error = s;
        if (sent) ++job.parts_sent;
        last = --job.parts_left == 0;
      }
      if (!last) continue;
      Status f = Finish(&job, client, summary);
      std::lock_guard<std::mutex> lock(error_mu);
      // Only the first: the others' are mostly the stop itself.
      if (!f.ok() && !stop_.exchange(true)) first_error = std::move(f);
    }
  };
  SHARDPACK_RETURN_IF_ERROR(RunOverConnections(
      &clients_, std::min<size_t>(static_cast<size_t>(connections_), work_items.size()), options_,
      work));
  // Multipart uploads a stop left unfinished.
  for (const auto& job : jobs) {
    if (!job->finished) Abort(job.get(), clients_[0].get());
  }
  SHARDPACK_RETURN_IF_ERROR(first_error);
  // Last: the commit point. Uploaded again every time (it is small, and a reader must find
  // the one that lists what was just sent).
  const std::string manifest_path = io::JoinPath(dir_, format::kManifestName);
  SHARDPACK_ASSIGN_OR_RETURN(std::string manifest,
                             env_->ReadFile(manifest_path, kMaxManifestBytes));
  const std::string manifest_url = ObjectUrl(std::string(format::kManifestName));
  SHARDPACK_RETURN_IF_ERROR(PutObject(manifest_url, manifest, clients_[0].get()));
  SHARDPACK_RETURN_IF_ERROR(CheckSize(manifest_url, manifest.size(), clients_[0].get()));
  ++summary->files;
  summary->bytes += manifest.size();
  return env_->FileExists(record_path) ? env_->RemoveFile(record_path) : Status::Ok();
}

}  // namespace

StatusOr<UploadSizes> ResolveUploadSizes(const RemoteOptions& options, const GetEnvFn& getenv) {
  UploadSizes sizes;
  SHARDPACK_ASSIGN_OR_RETURN(
      sizes.multipart_threshold,
      SizeFrom(options.multipart_threshold_bytes, getenv, "SHARDPACK_S3_MULTIPART_BYTES",
               kDefaultMultipartThresholdBytes));
  SHARDPACK_ASSIGN_OR_RETURN(
      sizes.part_bytes,
      SizeFrom(options.part_bytes, getenv, "SHARDPACK_S3_PART_BYTES", kDefaultPartBytes));
  return sizes;
}

std::vector<PartRange> PlanParts(uint64_t file_bytes, uint64_t part_bytes) {
  part_bytes = std::max<uint64_t>(part_bytes, 1);
  if (file_bytes / part_bytes >= kMaxParts) part_bytes = (file_bytes + kMaxParts - 1) / kMaxParts;
  std::vector<PartRange> parts;
  for (uint64_t offset = 0; offset < file_bytes; offset += part_bytes) {
    parts.push_back({offset, std::min(part_bytes, file_bytes - offset)});
  }
  if (parts.empty()) parts.push_back({0, 0});
  return parts;
}

std::string XmlElementText(std::string_view body, std::string_view name) {
  const std::string open = "<" + std::string(name) + ">";
  const std::string close = "</" + std::string(name) + ">";
  const size_t begin = body.find(open);
  if (begin == std::string_view::npos) return "";
  const size_t text = begin + open.size();
  const size_t end = body.find(close, text);
  if (end == std::string_view::npos) return "";
  return DecodeEntities(body.substr(text, end - text));
}

std::string CompleteMultipartXml(const std::vector<std::string>& etags) {
  std::string xml = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < etags.size(); ++i) {
    std::string etag;
    for (char c : etags[i]) etag += c == '&' ? "&amp;" : c == '<' ? "&lt;" : std::string(1, c);
    xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etag +
           "</ETag></Part>";
  }
  return xml + "</CompleteMultipartUpload>";
}

std::string MultipartQuery(std::string_view upload_id, int part_number) {
  // "uploads=", not "uploads": libcurl's SigV4 signs the query as written, and S3 signs
  // the canonical "uploads=".
  if (upload_id.empty()) return "uploads=";
  const std::string id = EscapePathSegment(upload_id);
  if (part_number == 0) return "uploadId=" + id;
  return "partNumber=" + std::to_string(part_number) + "&uploadId=" + id;
}

StatusOr<UploadSummary> UploadDataset(const std::string& dir, const std::string& url,
                                      const RemoteOptions& options) {
  SHARDPACK_ASSIGN_OR_RETURN(std::string base, NormalizeDatasetUrl(url));
  if (!IsS3Url(base)) return InvalidArgumentError(url + ": not an s3:// URL");
  SHARDPACK_ASSIGN_OR_RETURN(UploadSizes sizes, ResolveUploadSizes(options, ProcessEnv));
  SHARDPACK_ASSIGN_OR_RETURN(Manifest manifest, ReadManifest(dir));
  std::vector<Item> items;
  for (const FileEntry* f : ListedFiles(manifest))
    items.push_back({f->file, f->bytes, f->xxh3_128});
  SHARDPACK_ASSIGN_OR_RETURN(int connections, ResolveConnections(options));
  Uploader uploader(dir, base, sizes, connections, options);
  UploadSummary summary;
  SHARDPACK_RETURN_IF_ERROR(uploader.Publish(items, &summary));
  return summary;
}

StatusOr<bool> ObjectExists(const std::string& url, const RemoteOptions& options) {
  SHARDPACK_ASSIGN_OR_RETURN(auto client, HttpClient::Create(options));
  HttpRequest head;
  head.method = "HEAD";
  auto r = client->Send(url, head);
  if (r.ok()) return true;
  if (r.status().code() == StatusCode::kNotFound) return false;
  return r.status();
}

Status DeleteObject(const std::string& url, const RemoteOptions& options) {
  SHARDPACK_ASSIGN_OR_RETURN(auto client, HttpClient::Create(options));
  HttpRequest del;
  del.method = "DELETE";
  return client->Send(url, del).status();
}

}  // namespace shardpack::remote
