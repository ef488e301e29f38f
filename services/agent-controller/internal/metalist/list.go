// Package metalist reads a Kubernetes collection as metadata LIST pages
// and keeps of each object no more than its identity and resourceVersion.
package metalist

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"k8s.io/client-go/rest"
)

// A metadata LIST asks the API server for each object's metadata
// only, and read of it no more than its identity and resourceVersion. The
// server sends the whole of each object's metadata, managedFields
// included: for a run's Job, the field set of the whole pod template its
// creator wrote and of every status the Job controller wrote, several kB.
// Decoded into client-go's PartialObjectMetadata, those were about half of
// everything the controller allocated at 10,000 runs
// (docs/benchmarks.md). Read here from protobuf, where a field not read
// is skipped by its length, or from JSON where the server has no protobuf
// for the kind, only the few fields below are decoded.

// metadataListAccept asks for a LIST as a PartialObjectMetadataList, in
// protobuf, or JSON when the server cannot (custom resources).
const metadataListAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

// Item is what a LIST keeps of one listed object.
type Item struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
}

// page is what a LIST keeps of one page.
type page struct {
	Kind     string `json:"kind"`
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
		Continue        string `json:"continue"`
	} `json:"metadata"`
	Items []listedItem `json:"items"`
}

// listedItem is one object of a metadata LIST page.
type listedItem struct {
	Metadata Item `json:"metadata"`
}

// CollectionPath is the URL path of a collection of group/version (group
// "" is the core group) in namespace ("" for every namespace).
func CollectionPath(group, version, namespace, resource string) string {
	p := "/apis/" + group + "/" + version
	if group == "" {
		p = "/api/" + version
	}
	if namespace != "" {
		p += "/namespaces/" + namespace
	}
	return p + "/" + resource
}

// Request is one metadata LIST.
type Request struct {
	// Client sends the request; any REST client of the server will do, as
	// Path is absolute.
	Client rest.Interface
	// Path is the collection's (CollectionPath), Resource its name in
	// errors.
	Path, Resource string
	// Limit, when above 0, is the page size.
	Limit int64
	// LabelSelector, when set, selects the objects listed.
	LabelSelector string
}

// Result is what a LIST read.
type Result struct {
	// ResourceVersion is the LIST's: every object listed is at it or
	// older.
	ResourceVersion string
	// Pages counts the pages read.
	Pages int
}

// List reads every page of req as metadata only, handing each object's
// identity and resourceVersion to each with the LIST's resourceVersion.
func List(ctx context.Context, req Request, each func(m *Item, listRV string)) (Result, error) {
	var res Result
	if req.Client == nil {
		return res, fmt.Errorf("no REST client to list %s with", req.Resource)
	}
	cont := ""
	// One buffer for every page of the LIST: a page of 500 Jobs' metadata
	// is megabytes, which a decoder of its own per page would grow anew.
	var buf bytes.Buffer
	for {
		p, err := req.page(ctx, cont, &buf)
		if err != nil {
			return res, err
		}
		res.Pages++
		if res.ResourceVersion == "" {
			res.ResourceVersion = p.Metadata.ResourceVersion
		}
		for i := range p.Items {
			each(&p.Items[i].Metadata, res.ResourceVersion)
		}
		if p.Metadata.Continue == "" {
			return res, nil
		}
		cont = p.Metadata.Continue
	}
}

// page reads one page of req, from cont, through buf.
func (req Request) page(ctx context.Context, cont string, buf *bytes.Buffer) (*page, error) {
	r := req.Client.Get().AbsPath(req.Path).SetHeader("Accept", metadataListAccept)
	if req.Limit > 0 {
		r.Param("limit", strconv.FormatInt(req.Limit, 10))
	}
	if cont != "" {
		r.Param("continue", cont)
	}
	if req.LabelSelector != "" {
		r.Param("labelSelector", req.LabelSelector)
	}
	body, err := r.Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	buf.Reset()
	if _, err := buf.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("read a page of %s: %w", req.Resource, err)
	}
	p, err := decodePage(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("read a page of %s: %w", req.Resource, err)
	}
	return p, nil
}

// decodePage reads b, protobuf or JSON, as a page of a metadata LIST.
func decodePage(b []byte) (*page, error) {
	p := &page{}
	if bytes.HasPrefix(b, protobufPrefix) {
		if err := decodeProtoPage(b[len(protobufPrefix):], p); err != nil {
			return nil, err
		}
	} else if err := json.Unmarshal(b, p); err != nil {
		return nil, err
	}
	if p.Kind != "PartialObjectMetadataList" {
		// Read as a list of nothing, it would evict the whole cache.
		return nil, fmt.Errorf("the page came back as %q, not as PartialObjectMetadataList", p.Kind)
	}
	if p.Metadata.ResourceVersion == "" {
		// Every LIST the API server answers has one: this page is cut.
		return nil, errors.New("the page has no resourceVersion")
	}
	return p, nil
}
