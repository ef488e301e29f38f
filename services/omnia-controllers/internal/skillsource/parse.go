package skillsource

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// Limits of a skill document's frontmatter. A ConfigMap caps the whole
// document at 1 MiB already; the frontmatter cap keeps the YAML parser's
// work small whatever the body holds.
const (
	maxFrontmatterBytes = 64 << 10
	maxNameLen          = 64
	maxDescriptionLen   = 1024
	maxToolNameLen      = 253
)

// namePattern is the skill name rule of the Agent Skills format: lowercase
// letters, digits and single hyphens between them, so a name is also a
// safe directory name.
var namePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Frontmatter is the metadata block of one skill document.
type Frontmatter struct {
	// Name identifies the skill; PromptPacks include skills by it.
	Name string `json:"name"`
	// Description tells the model what the skill is for.
	Description string `json:"description"`
	// AllowedTools are the tools the skill may call.
	AllowedTools []string `json:"allowed-tools,omitempty"`
}

// ParseDocument reads the YAML frontmatter of a skill document: a first
// line "---", YAML, then a closing "---" line; the Markdown body after it
// is not interpreted. Unknown frontmatter fields are allowed, since the
// skill format has optional fields this controller does not use. The error
// says what is wrong in words a skill author can act on.
func ParseDocument(doc string) (Frontmatter, error) {
	var fm Frontmatter
	doc = strings.TrimPrefix(doc, "\ufeff") // editors on Windows add a BOM
	first, rest, _ := strings.Cut(doc, "\n")
	if strings.TrimRight(first, " \t\r") != "---" {
		return fm, errors.New(`does not start with a "---" frontmatter line`)
	}
	block, closed := frontmatterBlock(rest)
	if !closed {
		return fm, errors.New(`frontmatter is not closed by a "---" line`)
	}
	if len(block) > maxFrontmatterBytes {
		return fm, fmt.Errorf("frontmatter is %d bytes, more than the %d allowed", len(block), maxFrontmatterBytes)
	}
	if err := yaml.Unmarshal([]byte(block), &fm); err != nil {
		return Frontmatter{}, frontmatterError(err)
	}
	if err := fm.validate(); err != nil {
		return Frontmatter{}, err
	}
	return fm, nil
}

// frontmatterBlock returns the text before the first line that is "---"
// (trailing blanks and a carriage return allowed), and whether there is
// such a line.
func frontmatterBlock(s string) (string, bool) {
	off := 0
	for off <= len(s) {
		line, _, found := strings.Cut(s[off:], "\n")
		if strings.TrimRight(line, " \t\r") == "---" {
			return s[:off], true
		}
		if !found {
			return "", false
		}
		off += len(line) + 1
	}
	return "", false
}

// frontmatterError rewords the JSON decoder's type errors, which name Go
// types, in terms of the frontmatter fields.
func frontmatterError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		switch {
		case strings.HasPrefix(te.Field, "allowed-tools"):
			// The decoder names the field alike for the list and its items.
			return fmt.Errorf("frontmatter allowed-tools must be a list of tool names (strings); found a %s", te.Value)
		case te.Field != "":
			return fmt.Errorf("frontmatter %s must be a string, not a %s", te.Field, te.Value)
		default:
			return fmt.Errorf("frontmatter must be a YAML mapping, not a %s", te.Value)
		}
	}
	return fmt.Errorf("frontmatter is not valid YAML: %w", err)
}

func (fm *Frontmatter) validate() error {
	switch {
	case fm.Name == "":
		return errors.New("frontmatter has no name")
	case len(fm.Name) > maxNameLen:
		return fmt.Errorf("name is %d characters, more than %d", len(fm.Name), maxNameLen)
	case !namePattern.MatchString(fm.Name):
		return fmt.Errorf("name %q must be lowercase letters, digits and single hyphens between them", fm.Name)
	case strings.TrimSpace(fm.Description) == "":
		return fmt.Errorf("skill %q has no description", fm.Name)
	case len(fm.Description) > maxDescriptionLen:
		return fmt.Errorf("skill %q: description is %d bytes, more than %d", fm.Name, len(fm.Description), maxDescriptionLen)
	}
	seen := make(map[string]bool, len(fm.AllowedTools))
	for _, t := range fm.AllowedTools {
		switch {
		case t == "" || strings.TrimSpace(t) != t:
			return fmt.Errorf("skill %q: allowed-tools entry %q is empty or has surrounding blanks", fm.Name, t)
		case len(t) > maxToolNameLen:
			return fmt.Errorf("skill %q: allowed-tools entry is %d characters, more than %d", fm.Name, len(t), maxToolNameLen)
		case seen[t]:
			return fmt.Errorf("skill %q: allowed-tools lists %q twice", fm.Name, t)
		}
		seen[t] = true
	}
	return nil
}

// IsSkillDocumentKey reports whether a ConfigMap data key holds a skill
// document: "SKILL.md" itself or "<skill-dir>.SKILL.md".
func IsSkillDocumentKey(key string) bool {
	return key == omniav1.SkillDocumentKey || strings.HasSuffix(key, "."+omniav1.SkillDocumentKey)
}

// ContentError is content that is not a usable set of skills; Reason is
// the Ready condition reason to report it with.
type ContentError struct {
	// Reason is one of the SkillSource Ready reasons.
	Reason string
	// Message names the offending keys and carries the parser's words.
	Message string
}

func (e *ContentError) Error() string { return e.Message }

// Content is the parsed skill documents of one ConfigMap.
type Content struct {
	// Skills are sorted by name.
	Skills []omniav1.SkillSourceSkill
	// Checksum is "sha256:<hex>" over the skill document keys and values.
	Checksum string
}

// ParseContent parses every skill document of a ConfigMap's data. Every
// invalid document is reported, in key order, so one status update shows
// all that needs fixing.
func ParseContent(data map[string]string) (Content, error) {
	var keys []string
	for k := range data {
		if IsSkillDocumentKey(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return Content{}, &ContentError{Reason: omniav1.ReasonNoSkillDocuments,
			Message: fmt.Sprintf(`no skill document: no data key is %q or ends in ".%s"`, omniav1.SkillDocumentKey, omniav1.SkillDocumentKey)}
	}
	sort.Strings(keys)
	var bad []string
	byName := map[string]string{} // skill name -> key
	var dups []string
	var c Content
	h := sha256.New()
	for _, k := range keys {
		// NUL cannot occur in a key, so the framing is unambiguous.
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(data[k]))
		h.Write([]byte{0})
		fm, err := ParseDocument(data[k])
		if err != nil {
			bad = append(bad, fmt.Sprintf("key %q: %v", k, err))
			continue
		}
		if prev, ok := byName[fm.Name]; ok {
			dups = append(dups, fmt.Sprintf("skill %q is declared by keys %q and %q", fm.Name, prev, k))
			continue
		}
		byName[fm.Name] = k
		c.Skills = append(c.Skills, omniav1.SkillSourceSkill{Name: fm.Name, Description: fm.Description, AllowedTools: fm.AllowedTools, Key: k})
	}
	switch {
	case len(bad) > 0:
		return Content{}, &ContentError{Reason: omniav1.ReasonInvalidSkillDocument, Message: strings.Join(bad, "; ")}
	case len(dups) > 0:
		return Content{}, &ContentError{Reason: omniav1.ReasonDuplicateSkillName, Message: strings.Join(dups, "; ")}
	}
	sort.Slice(c.Skills, func(i, j int) bool { return c.Skills[i].Name < c.Skills[j].Name })
	c.Checksum = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return c, nil
}
