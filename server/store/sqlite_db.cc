// SQLite connection and statement wrappers.
#include "server/store/sqlite_db.h"

#include "absl/strings/str_cat.h"

namespace zshard::server {

absl::StatusOr<bool> SqliteStmt::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return absl::InternalError(
      absl::StrCat("sqlite step of '", sqlite3_sql(stmt_),
                   "' failed: ", sqlite3_errmsg(sqlite3_db_handle(stmt_))));
}

absl::Status SqliteStmt::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

std::string SqliteStmt::Text(int col) {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  return p == nullptr ? std::string()
                      : std::string(reinterpret_cast<const char*>(p), n);
}

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(
    const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
      nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(
        absl::StrCat("cannot open database '", path, "': ", msg));
  }
  sqlite3_busy_timeout(db, 5000);
  return std::unique_ptr<SqliteDb>(new SqliteDb(db));
}

SqliteDb::~SqliteDb() { sqlite3_close(db_); }

absl::Status SqliteDb::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return absl::InternalError(
        absl::StrCat("sqlite '", sql.substr(0, 60), "' failed: ", msg));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SqliteStmt>> SqliteDb::Prepare(
    const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("sqlite prepare of '", sql,
                                            "' failed: ", sqlite3_errmsg(db_)));
  }
  return std::make_unique<SqliteStmt>(stmt);
}

}  // namespace zshard::server
