// Package adk makes memstack the memory of Google's Agent Development Kit
// for Go (google.golang.org/adk/v2): a memory.Service (MemoryService) and a
// session.Service (SessionService) over memstack's stores.
package adk
