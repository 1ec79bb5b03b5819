package store

import "slices"

// MigrationsBefore is the schema history up to (not including) the step
// named name: a database "at the previous version" for upgrade tests.
func MigrationsBefore(name string) []Migration {
	i := slices.IndexFunc(migrations, func(m Migration) bool { return m.Name == name })
	if i < 0 {
		panic("store: no migration " + name)
	}
	return slices.Clone(migrations[:i])
}
