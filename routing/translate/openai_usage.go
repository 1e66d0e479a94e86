package translate

import "encoding/json"

// UnmarshalJSON reads an OpenAI-shaped usage object, accepting the
// input_tokens, output_tokens and input_tokens_details names that some
// OpenAI-compatible servers send instead of OpenAI's own, as the proxy's
// pass-through decoder (routing.UsageFromBody) does: a translated answer
// is billed like the same answer passed through. A missing total is the sum.
func (u *Usage) UnmarshalJSON(b []byte) error {
	var w struct {
		PromptTokens        *int64        `json:"prompt_tokens"`
		CompletionTokens    *int64        `json:"completion_tokens"`
		TotalTokens         int64         `json:"total_tokens"`
		PromptTokensDetails *TokenDetails `json:"prompt_tokens_details"`
		InputTokens         int64         `json:"input_tokens"`
		OutputTokens        int64         `json:"output_tokens"`
		InputTokensDetails  *TokenDetails `json:"input_tokens_details"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*u = Usage{PromptTokens: w.InputTokens, CompletionTokens: w.OutputTokens, TotalTokens: w.TotalTokens,
		PromptTokensDetails: w.PromptTokensDetails}
	if w.PromptTokens != nil {
		u.PromptTokens = *w.PromptTokens
	}
	if w.CompletionTokens != nil {
		u.CompletionTokens = *w.CompletionTokens
	}
	if u.PromptTokensDetails == nil {
		u.PromptTokensDetails = w.InputTokensDetails
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return nil
}
