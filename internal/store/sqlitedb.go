package store

import "database/sql"

// SQLiteDB returns the database of a SQLite store (nil for any other), so
// that a feature can keep its own tables in the same file: the file is
// opened with an exclusive lock, so a second handle would be refused.
func SQLiteDB(s Store) *sql.DB {
	if l, ok := s.(*local); ok {
		if sl, ok := l.led.(*sqlLedger); ok {
			return sl.db
		}
	}
	return nil
}
