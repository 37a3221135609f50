package ptrace

import (
	"errors"
	"strings"
)

// ParseMode reads a Mode's name: auto (or ""), stop or nostop, in any case.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "auto", "":
		return ModeAuto, nil
	case "stop":
		return ModeStop, nil
	case "nostop":
		return ModeNoStop, nil
	}
	return 0, errors.New("want auto, stop or nostop")
}
