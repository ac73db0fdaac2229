package agents

import (
	"fmt"

	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/config"
)

// ProvidersFromConfig returns the providers cfg configures beyond sim
// (which every Runtime has): openai when WEFT_OPENAI_API_KEY is set, with
// WEFT_OPENAI_BASE_URL, WEFT_OPENAI_MODEL as the default model and
// WEFT_OPENAI_PRICES for cost. Without a key, revisions naming openai fail
// with AGENT_UNAVAILABLE on this worker.
func ProvidersFromConfig(cfg config.Config) ([]provider.Provider, error) {
	if cfg.OpenAIAPIKey == "" {
		return nil, nil
	}
	prices, err := provider.ParsePrices(cfg.OpenAIPrices)
	if err != nil {
		return nil, fmt.Errorf("agents: WEFT_OPENAI_PRICES: %w", err)
	}
	p, err := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: cfg.OpenAIBaseURL, APIKey: cfg.OpenAIAPIKey,
		Model: cfg.OpenAIModel, Prices: prices, MaxTokensField: cfg.OpenAIMaxTokensField})
	if err != nil {
		return nil, err
	}
	return []provider.Provider{p}, nil
}
