package reqcheck

import (
	"switchboard/internal/jsoncheck"
	"switchboard/internal/spend"
	"switchboard/internal/translate"
)

// topLevel are the request fields the gateway reads at the top level of a
// body on some endpoint: every field pricing reads by name (content,
// output limits, sampling, tools, reasoning...), and the candidate counts
// the token estimate reads under other spellings. A case variant of any
// of them is refused on every endpoint.
var topLevel = append(spend.RequestFields(), "bestOf", "candidate_count")

// Specs of the two inbound protocols: the top level, and the objects
// under it the gateway reads by name (never free-form ones such as a
// tool's JSON schema or OpenAI's metadata map).
var openAI, anthropic, gemini = func() (*jsoncheck.Fields, *jsoncheck.Fields, *jsoncheck.Fields) {
	thinkingConfig := jsoncheck.NewFields("thinkingBudget", "thinking_budget")
	genConfig := jsoncheck.NewFields("maxOutputTokens", "max_output_tokens", "candidateCount", "candidate_count").
		Nest("thinkingConfig", thinkingConfig).Nest("thinking_config", thinkingConfig)
	thinking := jsoncheck.NewFields("type", "budget_tokens")
	common := func() *jsoncheck.Fields {
		return jsoncheck.NewFields(topLevel...).Nest("thinking", thinking).
			Nest("reasoning", jsoncheck.NewFields("effort")).
			Nest("stream_options", jsoncheck.NewFields("include_usage")).
			Nest("generationConfig", genConfig).Nest("generation_config", genConfig)
	}

	part := jsoncheck.NewFields("type", "text").Nest("image_url", jsoncheck.NewFields("url", "detail"))
	function := jsoncheck.NewFields("name", "description", "parameters", "arguments")
	message := jsoncheck.NewFields("role", "name", "tool_call_id").Nest("content", part).
		Nest("tool_calls", jsoncheck.NewFields("id", "type").Nest("function", function))
	oa := common().Nest("messages", message).
		Nest("tools", jsoncheck.NewFields("type").Nest("function", function)).
		Nest("tool_choice", jsoncheck.NewFields("type").Nest("function", jsoncheck.NewFields("name")))

	source := jsoncheck.NewFields("type", "media_type", "data", "url")
	block := jsoncheck.NewFields("type", "text", "title", "id", "name", "input", "tool_use_id", "is_error",
		"thinking", "signature", "data", "cache_control").Nest("source", source)
	block.Nest("content", block) // a tool_result's content holds blocks
	// What the /v1/messages translation reads besides pricing's fields.
	an := common().Add(translate.MessagesFields()...).Nest("messages", jsoncheck.NewFields("role").Nest("content", block)).
		Nest("system", block).
		Nest("tools", jsoncheck.NewFields("type", "name", "description", "input_schema", "cache_control")).
		Nest("tool_choice", jsoncheck.NewFields("type", "name", "disable_parallel_tool_use")).
		Nest("metadata", jsoncheck.NewFields("user_id"))

	// Gemini's generateContent body (the model is in the URL): what the
	// estimates, the gate and the translation read. Its JSON also takes
	// snake_case spellings, which are other names, not case variants.
	gpart := jsoncheck.NewFields("text", "thought", "functionCall", "functionResponse", "inlineData")
	content := jsoncheck.NewFields("role").Nest("parts", gpart)
	ge := common().Nest("contents", content).Nest("systemInstruction", content).Nest("system_instruction", content).
		Nest("tools", jsoncheck.NewFields("functionDeclarations", "function_declarations"))
	return oa, an, ge
}()
