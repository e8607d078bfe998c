-- Run output is compressed by Cairn before it is stored (core/logs/log-codec.ts), so PostgreSQL's
-- own TOAST compression (pglz) would only spend time on bytes that no longer shrink: the column is
-- stored out of line uncompressed. Each chunk names its encoding; the chunks stored before this
-- migration are raw bytes (0) and read as they always did.
ALTER TABLE run_log_chunks ADD COLUMN encoding smallint NOT NULL DEFAULT 0;
ALTER TABLE run_log_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
