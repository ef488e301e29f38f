package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The poll's metadata LISTs ask the API server for each object's metadata
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

// itemVersion is what the poll reads of one listed object.
type itemVersion struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
}

// versionsPage is what the poll reads of one page of a metadata LIST.
type versionsPage struct {
	Kind     string `json:"kind"`
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
		Continue        string `json:"continue"`
	} `json:"metadata"`
	Items []listedItem `json:"items"`
}

// listedItem is one object of a metadata LIST page.
type listedItem struct {
	Metadata itemVersion `json:"metadata"`
}

// path is the URL path of lw's collection.
func (lw *listWatch) path() string {
	p := "/apis/" + lw.gvk.Group + "/" + lw.gvk.Version
	if lw.gvk.Group == "" {
		p = "/api/" + lw.gvk.Version
	}
	if lw.namespace != "" {
		p += "/namespaces/" + lw.namespace
	}
	return p + "/" + lw.resource
}

// listVersions LISTs every page of lw's objects as metadata only, handing
// each object's identity and resourceVersion to each with the LIST's
// resourceVersion, and returns that version.
func (lw *listWatch) listVersions(ctx context.Context, each func(m *itemVersion, listRV string)) (string, error) {
	if lw.versions == nil {
		return "", fmt.Errorf("no REST client to list %s with", lw.resource)
	}
	listRV, cont := "", ""
	// One buffer for every page of the LIST: a page of 500 Jobs' metadata
	// is megabytes, which a decoder of its own per page would grow anew.
	var buf bytes.Buffer
	for {
		page, err := lw.versionsPage(ctx, cont, &buf)
		if err != nil {
			return "", err
		}
		lw.versionPages.Add(1)
		if listRV == "" {
			listRV = page.Metadata.ResourceVersion
		}
		for i := range page.Items {
			each(&page.Items[i].Metadata, listRV)
		}
		if page.Metadata.Continue == "" {
			return listRV, nil
		}
		cont = page.Metadata.Continue
	}
}

// versionsPage reads one page of lw's metadata LIST, from cont, through
// buf.
func (lw *listWatch) versionsPage(ctx context.Context, cont string, buf *bytes.Buffer) (*versionsPage, error) {
	req := lw.versions.Get().AbsPath(lw.path()).SetHeader("Accept", metadataListAccept)
	if lw.pageSize > 0 {
		req.Param("limit", strconv.FormatInt(lw.pageSize, 10))
	}
	if cont != "" {
		req.Param("continue", cont)
	}
	if lw.labelSelector != "" {
		req.Param("labelSelector", lw.labelSelector)
	}
	body, err := req.Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	buf.Reset()
	if _, err := buf.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("read a page of %s: %w", lw.resource, err)
	}
	page, err := decodeVersionsPage(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("read a page of %s: %w", lw.resource, err)
	}
	return page, nil
}

// decodeVersionsPage reads b, protobuf or JSON, as a page of a metadata
// LIST.
func decodeVersionsPage(b []byte) (*versionsPage, error) {
	page := &versionsPage{}
	if bytes.HasPrefix(b, protobufPrefix) {
		if err := decodeProtoPage(b[len(protobufPrefix):], page); err != nil {
			return nil, err
		}
	} else if err := json.Unmarshal(b, page); err != nil {
		return nil, err
	}
	if page.Kind != "PartialObjectMetadataList" {
		// Read as a list of nothing, it would evict the whole cache.
		return nil, fmt.Errorf("the page came back as %q, not as PartialObjectMetadataList", page.Kind)
	}
	if page.Metadata.ResourceVersion == "" {
		// Every LIST the API server answers has one: this page is cut.
		return nil, errors.New("the page has no resourceVersion")
	}
	return page, nil
}
