// Writes Kilo's config for the scripted model into CONFIG_DIR
// ($XDG_CONFIG_HOME/kilo), and pre-seeds node_modules/ and a
// package-lock.json listing @kilocode/plugin there, so Kilo (an OpenCode
// fork) skips the background install it starts in every config dir (which
// would reach the network from inside the sandbox). Run by Kilo's own
// binary in Bun mode:
//   BUN_BE_BUN=1 kilo kilo-setup.js CONFIG_DIR BASE_URL MODEL API_KEY_ENV
const fs = require("fs");
const path = require("path");

const [dir, baseURL, model, apiKeyEnv] = process.argv.slice(2);
if (!dir || !baseURL || !model || !apiKeyEnv) {
  console.error("usage: kilo-setup.js CONFIG_DIR BASE_URL MODEL API_KEY_ENV");
  process.exit(2);
}
fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
const config = {
  provider: {
    fake: {
      npm: "@ai-sdk/openai-compatible",
      name: "fake",
      options: { baseURL, apiKey: "{env:" + apiKeyEnv + "}" },
      models: { [model]: { name: model, tool_call: true, limit: { context: 128000, output: 4096 } } },
    },
  },
  model: "fake/" + model,
  small_model: "fake/" + model,
  autoupdate: false,
  share: "disabled",
  permission: { "*": "allow", external_directory: "allow" },
};
const write = (name, value) =>
  fs.writeFileSync(path.join(dir, name), JSON.stringify(value, null, 2) + "\n", { mode: 0o600 });
write("kilo.json", config);
const deps = { "@kilocode/plugin": "*" };
write("package.json", { dependencies: deps });
write("package-lock.json", {
  name: "kilo-config",
  lockfileVersion: 3,
  requires: true,
  packages: { "": { dependencies: deps }, "node_modules/@kilocode/plugin": { version: "0.0.0" } },
});
const plugin = path.join(dir, "node_modules", "@kilocode", "plugin");
fs.mkdirSync(plugin, { recursive: true });
fs.writeFileSync(path.join(plugin, "package.json"), JSON.stringify({ name: "@kilocode/plugin", version: "0.0.0" }) + "\n");
console.log("kilo config written to " + dir);
