// C functions that the `rocksdb` crate 0.25 (written against RocksDB 11.8's C API)
// calls but RocksDB 7.8 (Debian's librocksdb-dev) lacks. Compiled and linked only
// when the peer is built against a system RocksDB (`ROCKSDB_LIB_DIR`, see build.rs);
// the default build compiles RocksDB 11.8 from source and never sees this file.
//
// RocksDB 7.8's c.cc wraps its C++ objects in one-member structs; the two this file
// needs are declared here with the same single member (`rep`), so the pointers the C
// API hands out can be read. Nothing else of c.cc's layout is assumed.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/statistics.h>

using ROCKSDB_NAMESPACE::DB;
using ROCKSDB_NAMESPACE::FlushOptions;
using ROCKSDB_NAMESPACE::Options;
using ROCKSDB_NAMESPACE::Status;

extern "C" {
struct rocksdb_options_t {
  Options rep;
};
struct rocksdb_t {
  DB* rep;
};

// 11.8's options for rocksdb_wait_for_compact: only `flush` is used by the bench.
struct rocksdb_wait_for_compact_options_t {
  bool flush = false;
};

static void set_error(char** errptr, const Status& s) {
  if (!s.ok() && errptr != nullptr) {
    std::string m = s.ToString();
    char* out = static_cast<char*>(std::malloc(m.size() + 1));
    if (out != nullptr) {
      std::copy(m.begin(), m.end(), out);
      out[m.size()] = '\0';
      *errptr = out;
    }
  }
}

// The C API's levels (disable_all = 0, except_histogram_or_timers = 1, ...) are the
// C++ `StatsLevel` values in both versions.
void rocksdb_options_set_statistics_level(rocksdb_options_t* opt, int level) {
  if (opt->rep.statistics) {
    opt->rep.statistics->set_stats_level(
        static_cast<ROCKSDB_NAMESPACE::StatsLevel>(level));
  }
}

rocksdb_wait_for_compact_options_t* rocksdb_wait_for_compact_options_create() {
  return new rocksdb_wait_for_compact_options_t;
}

void rocksdb_wait_for_compact_options_destroy(rocksdb_wait_for_compact_options_t* o) {
  delete o;
}

void rocksdb_wait_for_compact_options_set_flush(rocksdb_wait_for_compact_options_t* o,
                                                unsigned char v) {
  o->flush = v != 0;
}

// 7.8 has no WaitForCompact: flush if asked, then poll until no flush or compaction
// is pending or running.
void rocksdb_wait_for_compact(rocksdb_t* db, rocksdb_wait_for_compact_options_t* o,
                              char** errptr) {
  if (o->flush) {
    Status s = db->rep->Flush(FlushOptions());
    if (!s.ok()) {
      set_error(errptr, s);
      return;
    }
  }
  for (;;) {
    uint64_t pending = 0, running = 0, flushes = 0, mem_flush = 0;
    db->rep->GetIntProperty("rocksdb.compaction-pending", &pending);
    db->rep->GetIntProperty("rocksdb.num-running-compactions", &running);
    db->rep->GetIntProperty("rocksdb.num-running-flushes", &flushes);
    db->rep->GetIntProperty("rocksdb.mem-table-flush-pending", &mem_flush);
    if (pending == 0 && running == 0 && flushes == 0 && mem_flush == 0) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The crate's write-buffer-manager handle is never created by the bench (7.8 has no C
// constructor for it); its destructor is referenced by the crate's Drop code only.
void rocksdb_write_buffer_manager_destroy(void* p) {
  if (p != nullptr) {
    std::abort();
  }
}
}
