package demo

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/scripted"
)

// TravelInput is the travel agent's input.
type TravelInput struct {
	Destination string `json:"destination" jsonschema:"minLength=1,description=Where to fly,example=Lisbon"`
}

// Weather is the weather tool's output.
type Weather struct {
	City       string `json:"city"`
	Conditions string `json:"conditions"`
	TempC      int    `json:"tempC"`
}

// FlightRequest is what the booking tool needs.
type FlightRequest struct {
	Destination string `json:"destination"`
	Date        string `json:"date"`
	Class       string `json:"class" jsonschema:"enum=economy,enum=business"`
}

// Booking is the booking tool's output.
type Booking struct {
	Confirmation string `json:"confirmation"`
	Destination  string `json:"destination"`
	Date         string `json:"date"`
	Class        string `json:"class"`
	PriceEUR     int    `json:"priceEUR"`
}

func defineTravel(app *loupe.App, model string, fx *effects) {
	weather := loupe.DefineTool(app, "getWeather", "Looks up the current weather of a city.",
		func(tc *ai.ToolContext, in struct {
			City string `json:"city"`
		}) (Weather, error) {
			defer fx.act(tc)()
			conditions := []string{"sunny", "cloudy", "light rain", "windy"}
			h := hash(in.City)
			return Weather{City: in.City, Conditions: conditions[h%4], TempC: 8 + int(h%20)}, nil
		})
	book := loupe.DefineTool(app, "bookFlight", "Books a flight. A person must approve each booking.",
		func(tc *ai.ToolContext, in FlightRequest) (Booking, error) {
			if !tc.IsResumed() {
				return Booking{}, tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{
					"message": fmt.Sprintf("Approve booking a %s flight to %s on %s for €%d?", in.Class, in.Destination, in.Date, price(in)),
					"price":   price(in),
				}})
			}
			defer fx.act(tc)()
			return Booking{
				Confirmation: fmt.Sprintf("LP-%06d", hash(tc.IdempotencyKey)%1000000),
				Destination:  in.Destination, Date: in.Date, Class: in.Class, PriceEUR: price(in),
			}, nil
		})
	loupe.DefineFlow(app, "travelAgent", func(ctx context.Context, in TravelInput) (string, error) {
		resp, err := loupe.Generate(ctx, app,
			ai.WithModelName(model),
			ai.WithSystem("You are a travel agent. Check the weather at the destination, then book a flight, then answer briefly."),
			ai.WithPrompt("Plan a trip to "+in.Destination+" next Friday."),
			ai.WithTools(weather, book),
		)
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
}

// travelScript: weather, then booking, then an answer that reads the booking (or its denial).
func travelScript(req *ai.ModelRequest) (scripted.Turn, error) {
	dest := strings.TrimSuffix(strings.TrimPrefix(firstUserText(req), "Plan a trip to "), " next Friday.")
	switch scripted.ModelTurns(req.Messages) {
	case 0:
		return scripted.Reply(ai.NewTextPart("Let me check the weather first."),
			scripted.ToolCall("getWeather", "weather-1", map[string]any{"city": dest})).WithUsage(120, 18), nil
	case 1:
		return scripted.Reply(scripted.ToolCall("bookFlight", "book-1",
			map[string]any{"destination": dest, "date": "next Friday", "class": "economy"})).WithUsage(180, 24), nil
	}
	for _, tr := range toolResponses(req) {
		if reason, ok := denied(tr); ok {
			return say(fmt.Sprintf("I did not book the flight to %s: the booking was denied (%s).", dest, reason)), nil
		}
		if b, ok := asMap(tr.Output); ok && tr.Name == "bookFlight" {
			return say(fmt.Sprintf("You're booked to %s on %v, %v class, confirmation %v. Pack for the weather!", dest, b["date"], b["class"], b["confirmation"])), nil
		}
	}
	return say("Your trip to " + dest + " is planned."), nil
}

func price(in FlightRequest) int {
	p := 90 + int(hash(in.Destination)%300)
	if in.Class == "business" {
		p *= 3
	}
	return p
}

func hash(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}
