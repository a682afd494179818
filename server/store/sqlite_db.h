// A thin RAII layer over the SQLite C API: a connection, prepared
// statements with typed binds and columns, and statuses that name the SQL.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::server {

// A prepared statement. Not thread-safe; owned by the caller.
class SqliteStmt {
 public:
  explicit SqliteStmt(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~SqliteStmt() { sqlite3_finalize(stmt_); }
  SqliteStmt(const SqliteStmt&) = delete;
  SqliteStmt& operator=(const SqliteStmt&) = delete;

  // Binds are 1-based, as in SQLite.
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void BindNull(int i) { sqlite3_bind_null(stmt_, i); }
  void Bind(int i, absl::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()),
                      SQLITE_TRANSIENT);
  }
  // Makes the statement ready to run again with new binds.
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  // Runs one step: true when a row is ready, false when done.
  absl::StatusOr<bool> Step();
  // Runs to completion, ignoring rows.
  absl::Status Run();
  // Columns are 0-based.
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  std::string Text(int col);

 private:
  sqlite3_stmt* stmt_;
};

// One database connection. Thread-compatible (callers serialise).
class SqliteDb {
 public:
  // Opens or creates the database file at `path`.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(
      const std::string& path);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs statements without results (schema, pragmas, BEGIN/COMMIT).
  absl::Status Exec(const std::string& sql);
  absl::StatusOr<std::unique_ptr<SqliteStmt>> Prepare(const std::string& sql);

 private:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

}  // namespace zshard::server
