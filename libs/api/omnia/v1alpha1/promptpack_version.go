package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// VersionPattern is the pattern spec.version of a PromptPack is validated
// against at admission (the same text is in the field's marker): semantic
// versioning 2.0 with an optional leading "v", and at most 18 digits in each
// of MAJOR, MINOR and PATCH so they fit an int64. ParseVersion accepts
// exactly the strings this pattern matches.
const VersionPattern = `^v?(0|[1-9][0-9]{0,17})\.(0|[1-9][0-9]{0,17})\.(0|[1-9][0-9]{0,17})(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`

// maxCoreDigits bounds MAJOR, MINOR and PATCH as VersionPattern does.
const maxCoreDigits = 18

// ErrInvalidVersion is wrapped by every error ParseVersion returns.
var ErrInvalidVersion = errors.New("invalid semantic version")

// Version is a parsed semantic version (semver 2.0).
type Version struct {
	// Major, Minor and Patch are the three release numbers.
	Major, Minor, Patch uint64
	// Prerelease holds the dot-separated identifiers after "-"; empty for a
	// release version.
	Prerelease []string
	// Build holds the dot-separated identifiers after "+". Build metadata
	// takes no part in precedence.
	Build []string
}

// ParseVersion parses a semantic version. One leading "v" is allowed and
// dropped ("v1.2.3" and "1.2.3" are the same version). MAJOR.MINOR.PATCH
// are all required and, like numeric prerelease identifiers, must not have
// leading zeros.
func ParseVersion(s string) (Version, error) {
	var v Version
	rest := strings.TrimPrefix(s, "v")
	rest, build, hasBuild := strings.Cut(rest, "+")
	core, pre, hasPre := strings.Cut(rest, "-")

	nums := strings.Split(core, ".")
	if len(nums) != 3 {
		return Version{}, fmt.Errorf("%w %q: want MAJOR.MINOR.PATCH", ErrInvalidVersion, s)
	}
	for i, dst := range []*uint64{&v.Major, &v.Minor, &v.Patch} {
		n, err := parseCoreNumber(nums[i])
		if err != nil {
			return Version{}, fmt.Errorf("%w %q: %w", ErrInvalidVersion, s, err)
		}
		*dst = n
	}
	if hasPre {
		ids, err := splitIdentifiers(pre, true)
		if err != nil {
			return Version{}, fmt.Errorf("%w %q: prerelease: %w", ErrInvalidVersion, s, err)
		}
		v.Prerelease = ids
	}
	if hasBuild {
		ids, err := splitIdentifiers(build, false)
		if err != nil {
			return Version{}, fmt.Errorf("%w %q: build metadata: %w", ErrInvalidVersion, s, err)
		}
		v.Build = ids
	}
	return v, nil
}

func parseCoreNumber(s string) (uint64, error) {
	switch {
	case s == "":
		return 0, errors.New("empty version number")
	case !allDigits(s):
		return 0, fmt.Errorf("version number %q is not numeric", s)
	case len(s) > 1 && s[0] == '0':
		return 0, fmt.Errorf("version number %q has a leading zero", s)
	case len(s) > maxCoreDigits:
		return 0, fmt.Errorf("version number %q has more than %d digits", s, maxCoreDigits)
	}
	return strconv.ParseUint(s, 10, 64)
}

// splitIdentifiers splits dot-separated identifiers and checks each is a
// non-empty run of [0-9A-Za-z-]; for prerelease identifiers a numeric one
// must not have a leading zero.
func splitIdentifiers(s string, prerelease bool) ([]string, error) {
	ids := strings.Split(s, ".")
	for _, id := range ids {
		if id == "" {
			return nil, errors.New("empty identifier")
		}
		for i := 0; i < len(id); i++ {
			if !isIdentChar(id[i]) {
				return nil, fmt.Errorf("identifier %q has a character outside [0-9A-Za-z-]", id)
			}
		}
		if prerelease && allDigits(id) && len(id) > 1 && id[0] == '0' {
			return nil, fmt.Errorf("numeric identifier %q has a leading zero", id)
		}
	}
	return ids, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// String formats the version canonically, without a leading "v".
func (v Version) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d.%d.%d", v.Major, v.Minor, v.Patch)
	if len(v.Prerelease) > 0 {
		b.WriteByte('-')
		b.WriteString(strings.Join(v.Prerelease, "."))
	}
	if len(v.Build) > 0 {
		b.WriteByte('+')
		b.WriteString(strings.Join(v.Build, "."))
	}
	return b.String()
}

// IsPrerelease reports whether the version has a prerelease part.
func (v Version) IsPrerelease() bool { return len(v.Prerelease) > 0 }

// Channel is the highest channel the version can serve: prerelease for a
// version with a prerelease part, stable otherwise.
func (v Version) Channel() PromptPackChannel {
	if v.IsPrerelease() {
		return ChannelPrerelease
	}
	return ChannelStable
}

// OnChannel reports whether the version competes on channel c: the stable
// channel admits release versions only, the prerelease channel admits every
// version (so a release higher than every prerelease serves both).
func (v Version) OnChannel(c PromptPackChannel) bool {
	switch c {
	case ChannelStable:
		return !v.IsPrerelease()
	case ChannelPrerelease:
		return true
	}
	return false
}

// Compare orders versions by semver precedence: -1 when v < o, 0 when they
// have equal precedence, +1 when v > o. Build metadata is ignored, so
// "1.2.3+a" and "1.2.3+b" compare equal.
func (v Version) Compare(o Version) int {
	for _, p := range [][2]uint64{{v.Major, o.Major}, {v.Minor, o.Minor}, {v.Patch, o.Patch}} {
		if p[0] != p[1] {
			if p[0] < p[1] {
				return -1
			}
			return 1
		}
	}
	// A release has higher precedence than any of its prereleases.
	switch {
	case len(v.Prerelease) == 0 && len(o.Prerelease) == 0:
		return 0
	case len(v.Prerelease) == 0:
		return 1
	case len(o.Prerelease) == 0:
		return -1
	}
	for i := 0; i < len(v.Prerelease) && i < len(o.Prerelease); i++ {
		if c := compareIdentifier(v.Prerelease[i], o.Prerelease[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(v.Prerelease) < len(o.Prerelease):
		return -1
	case len(v.Prerelease) > len(o.Prerelease):
		return 1
	}
	return 0
}

// compareIdentifier orders two prerelease identifiers: numeric ones
// numerically (without overflow: no leading zeros, so a longer one is
// larger), numeric before alphanumeric, alphanumeric ones by ASCII order.
func compareIdentifier(a, b string) int {
	an, bn := allDigits(a), allDigits(b)
	switch {
	case an && bn:
		if len(a) != len(b) {
			if len(a) < len(b) {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	case an:
		return -1
	case bn:
		return 1
	}
	return strings.Compare(a, b)
}

// Equal reports whether v and o have equal precedence (build metadata is
// ignored).
func (v Version) Equal(o Version) bool { return v.Compare(o) == 0 }

// VersionsEqual reports whether two version strings name the same version:
// identical strings, or both valid semantic versions of equal precedence
// ("v1.5.0" equals "1.5.0"; "1.2.3+a" equals "1.2.3+b").
func VersionsEqual(a, b string) bool {
	if a == b {
		return true
	}
	va, errA := ParseVersion(a)
	vb, errB := ParseVersion(b)
	return errA == nil && errB == nil && va.Equal(vb)
}

// CompareVersions parses both strings and compares them by precedence.
func CompareVersions(a, b string) (int, error) {
	va, err := ParseVersion(a)
	if err != nil {
		return 0, err
	}
	vb, err := ParseVersion(b)
	if err != nil {
		return 0, err
	}
	return va.Compare(vb), nil
}

// PromptPackObjectName is the conventional metadata.name of the PromptPack
// for a pack name and version: "pp-" and the first 12 hex digits of the
// SHA-256 of "<packName>@<version>". Tools that publish versions use it so
// that publishing the same version twice collides instead of duplicating;
// admission does not require it.
func PromptPackObjectName(packName, version string) string {
	sum := sha256.Sum256([]byte(packName + "@" + version))
	return "pp-" + hex.EncodeToString(sum[:])[:12]
}

// isIdentChar reports whether c may appear in a semver identifier.
func isIdentChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-'
}
