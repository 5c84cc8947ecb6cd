// Writes Pi's provider config for the scripted model (or any OpenAI-style
// endpoint) into the agent dir: models.json and settings.json (two retries
// of Pi's own, 1 s apart, and none in the provider's client: without them
// Pi met a 429 with exit 0 and no deliverable, failing certify's model-429,
// contract §7.6). Run by the runtime's own node:
//   node pi-setup.mjs AGENT_DIR BASE_URL MODEL API_KEY_ENV
import fs from "node:fs";
import path from "node:path";

const [agentDir, baseUrl, model, apiKeyEnv] = process.argv.slice(2);
if (!agentDir || !baseUrl || !model || !apiKeyEnv) {
  console.error("usage: pi-setup.mjs AGENT_DIR BASE_URL MODEL API_KEY_ENV");
  process.exit(2);
}
fs.mkdirSync(agentDir, { recursive: true, mode: 0o700 });
const models = {
  providers: {
    fake: {
      baseUrl,
      api: "openai-completions",
      apiKey: apiKeyEnv,
      compat: { supportsDeveloperRole: false },
      models: [{ id: model, name: model, contextWindow: 128000, maxTokens: 4096 }],
    },
  },
};
const settings = { retry: { enabled: true, maxRetries: 2, baseDelayMs: 1000, provider: { maxRetries: 0 } } };
fs.writeFileSync(path.join(agentDir, "models.json"), JSON.stringify(models, null, 2) + "\n", { mode: 0o600 });
fs.writeFileSync(path.join(agentDir, "settings.json"), JSON.stringify(settings, null, 2) + "\n", { mode: 0o600 });
console.log("pi config written to " + agentDir);
