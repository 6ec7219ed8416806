// Package provider owns octet's model wire formats: the OpenAI Responses API
// streamed over HTTP server-sent events ([HTTP]) and over a persistent
// WebSocket ([WebSocket]), and, over the same HTTP transport, the OpenAI
// Chat Completions and Anthropic Messages APIs ([HTTPConfig.Wire]). Every
// route yields the same [Event] types and the same typed failures; only a
// Responses route reports [ResponsesFeatures].
//
// The package translates a neutral [Request] into wire bytes and wire bytes
// back into a sequence of [Event] values, and it reports every failure as a
// typed [*Error] that says in which [Phase] it happened, which [Class] it
// belongs to and whether request bytes may have reached the server
// ([Error.Dispatched]). It owns wire facts and nothing else: there are no
// retries, no hidden replay and no recovery policy here. One call to
// [Transport.Open] sends at most one request; deciding whether to send
// another one is the agent's job.
//
// # Delivery contract of a Stream
//
// [Stream.Next] returns events in wire order. Text, reasoning and
// tool-argument deltas ([EventTextDelta], [EventReasoningDelta],
// [EventToolCallDelta]) are provisional presentation: they may be cut short by
// a failure and must never be persisted. [EventItemDone] carries the
// authoritative item assembled by the server; [EventCompleted] is the single
// must-deliver terminal event of a healthy response and carries the output
// items in output order plus usage. After EventCompleted, Next returns
// [io.EOF]. Any other ending is an [*Error]; once Next has returned an error
// it keeps returning the same error.
//
// Opening ([Transport.Open]: connect, send, response headers) and body
// consumption ([Stream.Next]) take separate contexts, so a caller can bound
// opening with an outage deadline without cutting a healthy body short.
// Cancelling either context is reported as [Canceled] (and the error wraps
// the context's error), never as a provider fault.
//
// Credentials never appear in an error, a log record or a debug dump.
package provider
