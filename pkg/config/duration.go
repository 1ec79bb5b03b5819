package config

import (
	"fmt"
	"time"
)

// Duration is a time.Duration written in TOML as a string such as "60s",
// "1m30s" or "500ms" (time.ParseDuration syntax).
type Duration struct{ time.Duration }

// MarshalText writes the duration in time.Duration.String form ("1m0s").
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.Duration.String()), nil
}

// UnmarshalText parses time.ParseDuration syntax.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := parseDuration(string(text))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// parseDuration is time.ParseDuration with the error this package reports.
func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return v, nil
}
