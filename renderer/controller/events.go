package controller

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// maxEventNote is the longest note the API server stores in an Event.
const maxEventNote = 1024

// boundedRecorder cuts notes to what an Event holds: the API server refuses
// a longer one, and the Event would be lost (a Stalled message naming many
// objects, the decoder's words). The condition keeps the whole message.
type boundedRecorder struct{ events.EventRecorder }

// Eventf records the Event with its note cut at maxEventNote bytes.
func (b boundedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", boundNote(fmt.Sprintf(note, args...)))
}

func boundNote(s string) string {
	if len(s) <= maxEventNote {
		return s
	}
	const more = " …"
	cut := maxEventNote - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}
