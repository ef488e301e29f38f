package v1alpha1

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		name    string
		in      string
		want    string // canonical String(); empty when an error is expected
		channel PromptPackChannel
	}{
		{"release", "1.2.3", "1.2.3", ChannelStable},
		{"leading v is dropped", "v1.2.3", "1.2.3", ChannelStable},
		{"zeros", "0.0.0", "0.0.0", ChannelStable},
		{"prerelease", "1.0.0-rc.1", "1.0.0-rc.1", ChannelPrerelease},
		{"prerelease with hyphen", "1.0.0-alpha-2.x", "1.0.0-alpha-2.x", ChannelPrerelease},
		{"prerelease numeric zero", "1.0.0-0", "1.0.0-0", ChannelPrerelease},
		{"prerelease alnum with leading zero", "1.0.0-0a", "1.0.0-0a", ChannelPrerelease},
		{"build metadata", "1.2.3+build.7", "1.2.3+build.7", ChannelStable},
		{"build metadata with leading zeros", "1.2.3+001", "1.2.3+001", ChannelStable},
		{"prerelease and build", "v2.0.0-beta.11+sha.5114f85", "2.0.0-beta.11+sha.5114f85", ChannelPrerelease},
		{"eighteen digits", "999999999999999999.0.0", "999999999999999999.0.0", ChannelStable},

		{"missing patch", "1.2", "", ""},
		{"missing minor and patch", "v1", "", ""},
		{"four numbers", "1.2.3.4", "", ""},
		{"empty", "", "", ""},
		{"only v", "v", "", ""},
		{"two v", "vv1.2.3", "", ""},
		{"capital V", "V1.2.3", "", ""},
		{"leading zero major", "01.2.3", "", ""},
		{"leading zero minor", "1.02.3", "", ""},
		{"leading zero patch", "1.2.03", "", ""},
		{"leading zero numeric prerelease", "1.2.3-01", "", ""},
		{"empty prerelease", "1.2.3-", "", ""},
		{"empty prerelease identifier", "1.2.3-rc..1", "", ""},
		{"empty build", "1.2.3+", "", ""},
		{"empty build identifier", "1.2.3+a..b", "", ""},
		{"underscore", "1.2.3-rc_1", "", ""},
		{"space", "1.2.3 ", "", ""},
		{"negative", "-1.2.3", "", ""},
		{"sign", "+1.2.3", "", ""},
		{"nineteen digits", "1000000000000000000.0.0", "", ""},
		{"non ascii digit", "1.2.٣", "", ""},
		{"two plus", "1.2.3+a+b", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := ParseVersion(c.in)
			if c.want == "" {
				if err == nil {
					t.Fatalf("ParseVersion(%q) = %v, want an error", c.in, v)
				}
				if !errors.Is(err, ErrInvalidVersion) {
					t.Errorf("error %v does not wrap ErrInvalidVersion", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseVersion(%q): %v", c.in, err)
			}
			if got := v.String(); got != c.want {
				t.Errorf("String() = %q, want %q", got, c.want)
			}
			if got := v.Channel(); got != c.channel {
				t.Errorf("Channel() = %q, want %q", got, c.channel)
			}
		})
	}
}

// TestComparePrecedence checks the precedence order of semver 2.0 §11 with a
// leading "v" and build metadata mixed in.
func TestComparePrecedence(t *testing.T) {
	ordered := []string{
		"0.9.9",
		"1.0.0-0",
		"1.0.0-1",
		"1.0.0-2",
		"1.0.0-10",
		"1.0.0-alpha",
		"v1.0.0-alpha.1",
		"1.0.0-alpha.beta",
		"1.0.0-beta",
		"1.0.0-beta.2",
		"1.0.0-beta.11",
		"1.0.0-rc.1",
		"1.0.0",
		"1.0.1",
		"1.1.0",
		"v1.10.0",
		"2.0.0+build",
		"10.0.0",
	}
	for i := range ordered {
		for j := range ordered {
			got, err := CompareVersions(ordered[i], ordered[j])
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

func TestCompareIgnoresBuildMetadata(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b string
		want bool
	}{
		{"identical strings", "1.2.3", "1.2.3", true},
		{"leading v", "v1.5.0", "1.5.0", true},
		{"different build metadata", "1.2.3+build.7", "1.2.3+other", true},
		{"build metadata against none", "1.2.3", "1.2.3+build", true},
		{"prerelease differs", "1.2.3-rc.1", "1.2.3-rc.2", false},
		{"prerelease against release", "1.2.3-rc.1", "1.2.3", false},
		{"patch differs", "1.2.3", "1.2.4", false},
		{"unparseable identical strings", "latest", "latest", true},
		{"unparseable different strings", "latest", "1.2.3", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := VersionsEqual(c.a, c.b); got != c.want {
				t.Errorf("VersionsEqual(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
			}
			if got := VersionsEqual(c.b, c.a); got != c.want {
				t.Errorf("VersionsEqual(%q, %q) = %v, want %v (not symmetric)", c.b, c.a, got, c.want)
			}
		})
	}
}

func TestCompareVersionsRejectsInvalid(t *testing.T) {
	if _, err := CompareVersions("1.2", "1.2.0"); !errors.Is(err, ErrInvalidVersion) {
		t.Errorf("first argument: got %v, want ErrInvalidVersion", err)
	}
	if _, err := CompareVersions("1.2.0", "x"); !errors.Is(err, ErrInvalidVersion) {
		t.Errorf("second argument: got %v, want ErrInvalidVersion", err)
	}
}

func TestOnChannel(t *testing.T) {
	for _, c := range []struct {
		name               string
		version            string
		stable, prerelease bool
	}{
		{"a release serves both channels", "1.2.3", true, true},
		{"build metadata is still a release", "1.2.3+b", true, true},
		{"a prerelease serves only the prerelease channel", "1.3.0-rc.1", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := ParseVersion(c.version)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.OnChannel(ChannelStable); got != c.stable {
				t.Errorf("OnChannel(stable) = %v, want %v", got, c.stable)
			}
			if got := v.OnChannel(ChannelPrerelease); got != c.prerelease {
				t.Errorf("OnChannel(prerelease) = %v, want %v", got, c.prerelease)
			}
			if v.OnChannel("nightly") {
				t.Error("OnChannel(unknown channel) = true")
			}
		})
	}
}

// TestHighestPerChannel shows how a controller picks each channel's version
// with OnChannel and Compare.
func TestHighestPerChannel(t *testing.T) {
	versions := []string{"1.0.0", "1.1.0", "1.2.0-rc.1", "v1.1.1+hotfix", "0.9.0"}
	highest := func(ch PromptPackChannel) string {
		var best *Version
		var bestRaw string
		for _, s := range versions {
			v, err := ParseVersion(s)
			if err != nil || !v.OnChannel(ch) {
				continue
			}
			if best == nil || v.Compare(*best) > 0 {
				best, bestRaw = &v, s
			}
		}
		return bestRaw
	}
	if got := highest(ChannelStable); got != "v1.1.1+hotfix" {
		t.Errorf("stable = %s, want v1.1.1+hotfix", got)
	}
	if got := highest(ChannelPrerelease); got != "1.2.0-rc.1" {
		t.Errorf("prerelease = %s, want 1.2.0-rc.1", got)
	}
}

func TestPromptPackObjectName(t *testing.T) {
	a := PromptPackObjectName("support", "1.2.0")
	if !regexp.MustCompile(`^pp-[0-9a-f]{12}$`).MatchString(a) {
		t.Fatalf("name %q is not pp- and 12 hex digits", a)
	}
	if a != PromptPackObjectName("support", "1.2.0") {
		t.Error("name is not deterministic")
	}
	if a == PromptPackObjectName("support", "1.2.1") || a == PromptPackObjectName("support2", "1.2.0") {
		t.Error("different pack versions share a name")
	}
	// sha256("support@1.2.0") starts with these 12 hex digits.
	if want := "pp-a6f8c4c83d50"; a != want {
		t.Errorf("name %s, want %s", a, want)
	}
}

// crdSchema reads the generated CRD of a plural name.
func crdSchema(t *testing.T, plural string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	path := filepath.Join("..", "..", "..", "..", "deploy", "crds", GroupName+"_"+plural+".yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read generated CRD (run make generate): %v", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// TestVersionPatternMatchesCRD guards against the kubebuilder markers and the
// Go constant drifting apart: admission and ParseVersion must agree.
func TestVersionPatternMatchesCRD(t *testing.T) {
	pp := crdSchema(t, "promptpacks").Properties["spec"].Properties["version"].Pattern
	if pp != VersionPattern {
		t.Errorf("PromptPack spec.version pattern\n %s\nwant VersionPattern\n %s", pp, VersionPattern)
	}
	ar := crdSchema(t, "agentruntimes").Properties["spec"].Properties["promptPackRef"].Properties["version"].Pattern
	if ar != VersionPattern {
		t.Errorf("AgentRuntime spec.promptPackRef.version pattern\n %s\nwant VersionPattern\n %s", ar, VersionPattern)
	}
}

// TestDurationPatternMatchesCRDs checks every duration-looking pattern of
// every CRD of the group is DurationPattern, and that it accepts what
// time.ParseDuration accepts for the usual forms.
func TestDurationPatternMatchesCRDs(t *testing.T) {
	for _, plural := range []string{"agentruntimes", "promptpacks", "toolregistries", "providers", "toolpolicies", "sandboxclasses", "connections"} {
		var walk func(s *apiextensionsv1.JSONSchemaProps, path string)
		walk = func(s *apiextensionsv1.JSONSchemaProps, path string) {
			if strings.Contains(s.Pattern, "(ns|us|") && s.Pattern != DurationPattern {
				t.Errorf("%s%s: duration pattern %s differs from DurationPattern", plural, path, s.Pattern)
			}
			for name, p := range s.Properties {
				walk(&p, path+"."+name)
			}
			if s.Items != nil && s.Items.Schema != nil {
				walk(s.Items.Schema, path+"[]")
			}
		}
		walk(crdSchema(t, plural), "")
	}
	re := regexp.MustCompile(DurationPattern)
	for _, ok := range []string{"0", "30s", "1m30s", "1.5h", "100ms", "10us", "10µs", "5ns"} {
		if !re.MatchString(ok) {
			t.Errorf("DurationPattern refuses %q", ok)
		}
	}
	for _, bad := range []string{"", "30", "-5s", "5 m", "1d", "s", "1.s"} {
		if re.MatchString(bad) {
			t.Errorf("DurationPattern accepts %q", bad)
		}
	}
}

func TestParseVersionAgreesWithPattern(t *testing.T) {
	re := regexp.MustCompile(VersionPattern)
	for _, s := range []string{"1.2.3", "v0.0.1-a.b-c+d.e-f", "1.2", "01.2.3", "1.2.3-01", "1.2.3+01", "1.0.0-0a", "V1.0.0"} {
		_, err := ParseVersion(s)
		if (err == nil) != re.MatchString(s) {
			t.Errorf("%q: ParseVersion error %v, pattern match %v", s, err, re.MatchString(s))
		}
	}
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"1.2.3", "v1.0.0-rc.1+b.7", "1.0.0-alpha-2", "01.0.0", "1.2", "1.0.0-", "1.0.0+", "v", "1.2.3-0a.0"} {
		f.Add(s, "1.2.3")
	}
	re := regexp.MustCompile(VersionPattern)
	f.Fuzz(func(t *testing.T, a, b string) {
		va, err := ParseVersion(a)
		if matched := re.MatchString(a); matched != (err == nil) {
			t.Fatalf("%q: pattern match %v but ParseVersion error %v", a, matched, err)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidVersion) {
				t.Fatalf("%q: error %v does not wrap ErrInvalidVersion", a, err)
			}
			return
		}
		// The canonical form parses back to the same version.
		again, err := ParseVersion(va.String())
		if err != nil {
			t.Fatalf("%q: canonical form %q does not parse: %v", a, va.String(), err)
		}
		if again.String() != va.String() || !slices.Equal(again.Build, va.Build) || !again.Equal(va) {
			t.Fatalf("%q: round trip %q -> %q", a, va.String(), again.String())
		}
		same := va // a copy, so Compare is checked against an equal value, not only itself
		if va.Compare(same) != 0 || !VersionsEqual(a, va.String()) {
			t.Fatalf("%q: not equal to itself", a)
		}
		if va.IsPrerelease() != (va.Channel() == ChannelPrerelease) {
			t.Fatalf("%q: channel %s disagrees with prerelease %v", a, va.Channel(), va.Prerelease)
		}
		vb, err := ParseVersion(b)
		if err != nil {
			return
		}
		if ab, ba := va.Compare(vb), vb.Compare(va); ab != -ba {
			t.Fatalf("Compare(%q, %q) = %d but Compare(%q, %q) = %d", a, b, ab, b, a, ba)
		}
		if VersionsEqual(a, b) != VersionsEqual(b, a) {
			t.Fatalf("VersionsEqual(%q, %q) is not symmetric", a, b)
		}
	})
}
